/// The release of Parley this code belongs to: the SDK, the server, the CLI and the wire types share one version.
///
/// [Semantic versioning](https://semver.org): before 1.0.0 a minor release (0.x.0) may change the SDK's API or
/// need a server upgrade, and CHANGELOG.md says how; a patch release (0.x.y) never does. Apps pin a release with
/// `.package(url: ..., from: "0.1.0", traits: [])`. CONTRIBUTING.md has the release steps; a test keeps this constant
/// the same as CHANGELOG.md's newest release section.
public enum ParleyRelease {
    /// The version, `MAJOR.MINOR.PATCH`.
    public static let version = "0.1.0"
}
