// swift-tools-version: 6.1
import PackageDescription

// An app that depends on the Parley SDK alone, as an iOS or macOS app's package (or Xcode project) does: by path here,
// by URL and version in an app (`.package(url: "https://github.com/OWNER/parley.git", from: "0.1.0", traits: [])`).
// `traits: []` turns off the package's `Server` trait, so SwiftPM fetches only the SDK's dependencies and no build plugin
// runs. scripts/check-light-install resolves it and lists what it fetched (docs/SDK.md, "Installing").
let package = Package(
    name: "LightApp",
    platforms: [.macOS(.v14), .iOS(.v17)],
    dependencies: [
        .package(name: "parley", path: "../..", traits: [])
    ],
    targets: [
        .executableTarget(name: "LightApp", dependencies: [.product(name: "Parley", package: "parley")])
    ]
)
