import CParleyBuild
import ParleyProtocol

/// What this build of the server is: its release and the commit it was built from (`parley_build_info`,
/// `parley-server --version`).
public enum ServerBuild {
    public static let version = ParleyRelease.version
    /// Git's commit hash, `-dirty` when built with uncommitted changes, `unknown` outside a git checkout (see the
    /// package manifest's `commit`).
    public static let commit = String(cString: parley_build_commit())
}
