// swift-tools-version: 6.1
import PackageDescription

// The OpenAPI generator at one exact version: scripts/generate-api runs it to write the REST API's Swift code into
// Sources/ParleyAPI*/Generated, which is checked in, so that an app that depends on the SDK runs no build plugin and
// fetches no generator (docs/SDK.md, "Installing"). Not part of the Parley package.
let package = Package(
    name: "parley-openapi-generator",
    dependencies: [
        .package(url: "https://github.com/apple/swift-openapi-generator.git", exact: "1.14.3")
    ],
    targets: []
)
