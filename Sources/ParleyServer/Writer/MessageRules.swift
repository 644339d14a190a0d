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
        parts: [MessagePart], metadata: JSONValue?, alert: String?, clientMessageId: String?, replyTo: String? = nil,
        mentions: [String]? = nil, limits: MessageLimits
    ) throws {
        try InputRules.message(parts: parts, metadata: metadata, alert: alert)
        if let violation = limits.violation(parts: parts, metadata: metadata, alert: alert) {
            throw DomainError(violation, explanation(violation, limits: limits))
        }
        try InputRules.identifier(clientMessageId, "clientMessageId")
        try InputRules.identifier(replyTo, "replyTo")
        try validate(mentions: mentions)
    }

    /// Throws the ``DomainError`` that rejects an edit's new content, if any: the limits of sending.
    static func validateEdit(
        messageId: String, parts: [MessagePart], metadata: JSONValue?, mentions: [String]?, limits: MessageLimits
    ) throws {
        try InputRules.identifier(messageId, "messageId")
        try validate(
            parts: parts, metadata: metadata, alert: nil, clientMessageId: nil, mentions: mentions, limits: limits)
    }

    /// At most ``MessageLifecycle/maxMentions`` valid uids.
    static func validate(mentions: [String]?) throws {
        guard let mentions else { return }
        guard mentions.count <= MessageLifecycle.maxMentions else {
            throw DomainError(.fieldTooLarge, "A message may mention at most \(MessageLifecycle.maxMentions) users.")
        }
        for uid in mentions { try InputRules.uid(uid) }
    }

    /// A reaction's message id and key.
    static func validateReaction(messageId: String, key: String) throws {
        try InputRules.identifier(messageId, "messageId")
        guard MessageLifecycle.isValidReactionKey(key) else {
            throw DomainError(
                .badRequest,
                "A reaction key is 1-\(MessageLifecycle.maxReactionKeyBytes) bytes without whitespace or control characters."
            )
        }
    }
}
