import ParleyProtocol
import ParleyStore

/// Checks on a message that both the REST and the WebSocket send paths apply before storing it.
enum MessageRules {
    /// A human explanation of a ``MessageLimits`` violation.
    static func explanation(_ code: ErrorCode, limits: MessageLimits) -> String {
        switch code {
        case .messageEmpty: return "A message needs a non-empty text part or a data part."
        case .messageTooLarge:
            return "A message may have at most \(limits.maxParts) parts and \(limits.maxBytes) bytes of content."
        default: return "The message is not acceptable."
        }
    }

    /// Throws the ``DomainError`` that rejects a message, if any.
    static func validate(
        parts: [MessagePart], metadata: JSONValue?, alert: String?, clientMessageId: String?, limits: MessageLimits
    ) throws {
        if let violation = limits.violation(parts: parts, metadata: metadata, alert: alert) {
            throw DomainError(violation, explanation(violation, limits: limits))
        }
        try InputRules.identifier(clientMessageId, "clientMessageId")
    }
}
