import ParleyProtocol

/// A rule of the domain refused an operation: the documented code says which.
///
/// Stores throw it (or return it per command) for expected refusals: a missing conversation, a caller who is
/// not a participant, a duplicate uid. Anything else they throw is a failure of the store itself.
public struct DomainError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: ErrorCode
    public var message: String
    /// With `ERR_RATE_LIMITED`: how long until the refused action may succeed.
    public var retryAfter: Duration?

    public init(_ code: ErrorCode, _ message: String, retryAfter: Duration? = nil) {
        self.code = code
        self.message = message
        self.retryAfter = retryAfter
    }

    public var description: String { "\(code.rawValue): \(message)" }

    public static func conversationNotFound(_ id: String) -> DomainError {
        DomainError(.conversationNotFound, "No conversation \(id) visible to you.")
    }

    public static func uidNotFound(_ uid: String) -> DomainError {
        DomainError(.uidNotFound, "No user \(uid) in this app.")
    }
}
