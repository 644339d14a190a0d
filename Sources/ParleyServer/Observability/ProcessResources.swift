import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What the process holds of the machine's limited resources, read when asked (a metrics scrape, the admission gate's
/// descriptor budget): descriptors open and allowed, and the room on a folder's file system.
enum ProcessResources {
    /// Descriptors open now (`/proc/self/fd`, less the one listing it takes); nil where there is no `/proc`.
    static func openFileDescriptors() -> Int? {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")).map { max(0, $0.count - 1) }
    }

    /// The soft limit on open descriptors (`RLIMIT_NOFILE`); nil when unlimited or unknown.
    static func maxFileDescriptors() -> Int? {
        var limit = rlimit()
        #if canImport(Glibc)
            let resource = Int32(RLIMIT_NOFILE.rawValue)
        #else
            let resource = RLIMIT_NOFILE
        #endif
        guard getrlimit(resource, &limit) == 0, limit.rlim_cur < rlim_t(Int32.max) else { return nil }
        return Int(limit.rlim_cur)
    }

    /// Bytes free for the server (not root's reserve) and bytes in all on the file system of `path`.
    static func fileSystem(of path: String) -> (free: Int64, size: Int64)? {
        var stats = statvfs()
        guard statvfs(path, &stats) == 0 else { return nil }
        let block = Int64(stats.f_frsize)
        return (Int64(stats.f_bavail) * block, Int64(stats.f_blocks) * block)
    }
}
