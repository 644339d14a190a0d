import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// The web console (docs/CONSOLE.md): plain HTML, CSS and JavaScript files shipped in the package
/// (`Sources/ParleyServer/Console/web`), read once at start and served from memory under `/console/`.
///
/// Only the files found at start are served, by exact name: a request cannot reach anything else on disk. Every answer
/// carries a strict Content-Security-Policy (scripts, styles and connections from this server only), an ETag, and
/// `Cache-Control: no-cache` (browsers revalidate, a new server version is picked up at once).
struct ConsoleFiles: Sendable {
    struct File: Sendable {
        let body: ByteBuffer
        let contentType: String
        let etag: String
    }

    /// The console's mount point.
    static let path = "console"
    /// Largest file, and most files, the console may have: what is read into memory at start stays small.
    static let maxFileBytes = 1024 * 1024
    static let maxFiles = 200

    let files: [String: File]

    /// Reads every file below `directory` (names relative to it, with `/`).
    init(directory: URL) throws {
        var files: [String: File] = [:]
        let root = directory.standardizedFileURL.resolvingSymlinksInPath()
        guard
            let walker = FileManager.default.enumerator(
                at: root, includingPropertiesForKeys: [.isRegularFileKey, .fileSizeKey], options: [.skipsHiddenFiles]
            )
        else { throw ConsoleFilesError.notADirectory(directory.path) }
        let prefix = root.path.hasSuffix("/") ? root.path : root.path + "/"
        for case let url as URL in walker {
            let values = try url.resourceValues(forKeys: [.isRegularFileKey, .fileSizeKey])
            guard values.isRegularFile == true else { continue }
            let fullPath = url.standardizedFileURL.resolvingSymlinksInPath().path
            guard fullPath.hasPrefix(prefix) else { continue }
            guard (values.fileSize ?? 0) <= Self.maxFileBytes, files.count < Self.maxFiles else {
                throw ConsoleFilesError.tooLarge(fullPath)
            }
            let bytes = try Data(contentsOf: url)
            let name = String(fullPath.dropFirst(prefix.count))
            files[name] = File(
                body: ByteBuffer(bytes: bytes), contentType: Self.contentType(of: name),
                etag: "\"" + Secrets.hex(SHA256.hash(data: bytes).prefix(16)) + "\""
            )
        }
        guard files["index.html"] != nil else { throw ConsoleFilesError.noIndex(directory.path) }
        self.files = files
    }

    /// The console shipped with the server: the resource bundle next to the executable (SwiftPM copies it there), else
    /// the package's source folder this binary was built from.
    static func bundledDirectory() -> URL? {
        var candidates: [URL] = []
        if let executable = Bundle.main.executableURL {
            candidates.append(
                executable.deletingLastPathComponent().appendingPathComponent("parley_ParleyServer.resources/web")
            )
        }
        candidates.append(URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("web"))
        return candidates.first { FileManager.default.fileExists(atPath: $0.appendingPathComponent("index.html").path) }
    }

    static func contentType(of name: String) -> String {
        switch name.split(separator: ".").last.map({ $0.lowercased() }) {
        case "html": return "text/html; charset=utf-8"
        case "css": return "text/css; charset=utf-8"
        case "js", "mjs": return "text/javascript; charset=utf-8"
        case "json": return "application/json; charset=utf-8"
        case "svg": return "image/svg+xml"
        case "png": return "image/png"
        case "ico": return "image/x-icon"
        case "txt", "md": return "text/plain; charset=utf-8"
        default: return "application/octet-stream"
        }
    }

    static let securityHeaders: HTTPFields = [
        HTTPField.Name("Content-Security-Policy")!:
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self' ws: wss:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
        HTTPField.Name("X-Content-Type-Options")!: "nosniff",
        HTTPField.Name("Referrer-Policy")!: "no-referrer",
        HTTPField.Name("X-Frame-Options")!: "DENY",
    ]

    /// The answer to `GET`/`HEAD /console/<name>`: the file, 304 when the browser has it, or 404.
    func response(for name: String, request: Request) throws -> Response {
        let name = name.isEmpty ? "index.html" : name
        guard let file = files[name] else { throw HTTPError(.notFound) }
        var headers = Self.securityHeaders
        headers[.contentType] = file.contentType
        headers[.eTag] = file.etag
        headers[.cacheControl] = "no-cache"
        if let known = request.headers[.ifNoneMatch],
            known.split(separator: ",").contains(where: {
                $0.trimmingCharacters(in: .whitespaces) == file.etag
            })
        {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentLength] = "\(file.body.readableBytes)"
        let body: ResponseBody = request.method == .head ? .init() : .init(byteBuffer: file.body)
        return Response(status: .ok, headers: headers, body: body)
    }

    /// `/console` → `/console/`, and every file below it.
    func register<Context: RequestContext>(on router: Router<Context>) {
        // The router does not tell `/console` from `/console/`: relative links need the slash.
        router.get(RouterPath(Self.path)) { request, _ in
            guard request.uri.path.hasSuffix("/") else {
                return Response(status: .permanentRedirect, headers: [.location: "/\(Self.path)/"])
            }
            return try response(for: "", request: request)
        }
        router.get(RouterPath(Self.path + "/**")) { request, context in
            try response(for: context.parameters.getCatchAll().joined(separator: "/"), request: request)
        }
        router.head(RouterPath(Self.path + "/**")) { request, context in
            try response(for: context.parameters.getCatchAll().joined(separator: "/"), request: request)
        }
    }
}

enum ConsoleFilesError: Error, CustomStringConvertible {
    case notADirectory(String)
    case noIndex(String)
    case tooLarge(String)

    var description: String {
        switch self {
        case .notADirectory(let path): return "The console folder \(path) cannot be read."
        case .noIndex(let path): return "The console folder \(path) has no index.html."
        case .tooLarge(let path):
            return
                "The console file \(path) is too large (over \(ConsoleFiles.maxFileBytes) bytes) or there are too many."
        }
    }
}
