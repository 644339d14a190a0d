import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyStore

/// The web origins each app allows to call the REST API (CORS), read from the store and kept for
/// ``refreshInterval``: a change made on this node applies at once, one made on another node within the interval.
///
/// Only requests that carry an `Origin` header (browsers) ask; other clients never touch it.
final class AllowedOrigins: Sendable {
    /// How long a read of the apps' origins is used before the next request with an `Origin` reads them again.
    static let refreshInterval: Int64 = 5_000

    private struct State {
        var byApp: [String: Set<String>] = [:]
        var loadedAt: Int64?
        var refreshing = false
    }

    private let store: any ParleyStore
    private let time: ServerClock
    private let state = NIOLockedValueBox(State())

    init(store: any ParleyStore, time: ServerClock) {
        self.store = store
        self.time = time
    }

    /// Whether `origin` may call the REST API for `appId`; for nil (a request that named no app yet, such as a
    /// preflight or a refusal before authentication), whether any app allows it.
    func allows(_ origin: String, appId: String?) async -> Bool {
        await refreshIfStale()
        return state.withLockedValue { state in
            let allows = { (origins: Set<String>) in origins.contains("*") || origins.contains(origin) }
            guard let appId else { return state.byApp.values.contains(where: allows) }
            return state.byApp[appId].map(allows) ?? false
        }
    }

    /// Records an app's new list (after the store has it).
    func update(appId: String, origins: [String]) {
        state.withLockedValue { $0.byApp[appId] = Set(origins) }
    }

    /// Reads every app's list when the last read is older than ``refreshInterval``. One request reads; the others
    /// use the list they have meanwhile (the first read of all is awaited by whoever comes).
    private func refreshIfStale() async {
        let now = time.epochMilliseconds()
        let shouldRead = state.withLockedValue { state -> Bool in
            if let loadedAt = state.loadedAt, now - loadedAt < Self.refreshInterval { return false }
            if state.refreshing, state.loadedAt != nil { return false }
            state.refreshing = true
            return true
        }
        guard shouldRead else { return }
        let apps = try? await store.apps()
        state.withLockedValue { state in
            state.refreshing = false
            // A failed read keeps the last list and is tried again by the next request.
            guard let apps else { return }
            state.byApp = Dictionary(apps.map { ($0.id, Set($0.allowedOrigins)) }, uniquingKeysWith: { $1 })
            state.loadedAt = now
        }
    }

    /// The stored form of an origin an operator typed: `*`, or `scheme://host[:port]` lowercased, with http or https,
    /// without the scheme's default port (a browser's `Origin` header leaves it out), no path, query, fragment or
    /// user. Throws `ERR_BAD_REQUEST` for anything else.
    static func normalized(_ origin: String) throws -> String {
        if origin == "*" { return origin }
        let refusal = DomainError(
            .badRequest,
            "An allowed origin is scheme://host[:port] with http or https, or *: not \(origin.prefix(200))."
        )
        guard origin.utf8.count <= 200, origin.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 })
        else { throw refusal }
        let lower = origin.lowercased()
        let scheme: String
        if lower.hasPrefix("https://") {
            scheme = "https"
        } else if lower.hasPrefix("http://") {
            scheme = "http"
        } else {
            throw refusal
        }
        let authority = lower.dropFirst(scheme.count + 3)
        guard !authority.isEmpty, !authority.contains(where: { "/?#@\\".contains($0) }) else { throw refusal }
        var host = Substring(authority)
        var port: Int?
        if let colon = authority.lastIndex(of: ":"), !authority[colon...].contains("]") {
            guard let number = Int(authority[authority.index(after: colon)...]), (1...65535).contains(number) else {
                throw refusal
            }
            host = authority[..<colon]
            port = number
        }
        let bracketed = host.hasPrefix("[") && host.hasSuffix("]") && host.count > 2
        guard !host.isEmpty,
            bracketed
                || host.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "." || $0 == "_" })
        else { throw refusal }
        let defaultPort = scheme == "https" ? 443 : 80
        guard let port, port != defaultPort else { return "\(scheme)://\(host)" }
        return "\(scheme)://\(host):\(port)"
    }
}
