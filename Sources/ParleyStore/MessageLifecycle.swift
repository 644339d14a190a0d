import Foundation
import ParleyProtocol

/// What happens to a message after it is sent (edits, deletion, reactions, replies, mentions): the rules and the
/// changes of state that every store applies the same way.
///
/// A message lives in its `conversationMessage.sent` event. An edit appends a `conversationMessage.update` event and
/// rewrites the bodies of the message's earlier `sent` and `update` events to the new version, so no earlier version is
/// kept anywhere (a client that replays them sees the latest). A deletion appends `conversationMessage.delete` and
/// rewrites those bodies to the tombstone (``tombstone(of:by:at:)``): the content is gone from every row, and the
/// message keeps its place.
public enum MessageLifecycle {
    /// Most distinct reaction keys on one message.
    public static let maxReactionKeysPerMessage = 50
    /// Most distinct keys one participant gives one message.
    public static let maxReactionKeysPerUser = 20
    /// Most uids one message mentions.
    public static let maxMentions = 50
    /// Longest reaction key, in UTF-8 bytes.
    public static let maxReactionKeyBytes = 64
    /// Most messages pinned to one conversation.
    public static let maxPinsPerConversation = 50

    // MARK: Rules

    /// `actor` (with `role`) edits `message`: their own when their role may send, others' when it may edit them.
    public static func requireEdit(
        _ message: Message, actor: String, role: ParticipantRole, roles: ConversationRoles
    ) throws {
        guard !message.isDeleted else { throw deleted(message.id) }
        if message.sender == actor {
            guard roles[role].canSend else {
                throw DomainError(.forbidden, "In this conversation a \(role.rawValue) may not edit messages.")
            }
        } else {
            guard roles[role].canEditOthersMessages else {
                throw DomainError(.forbidden, "In this conversation a \(role.rawValue) may not edit others' messages.")
            }
        }
    }

    /// `actor` (with `role`) deletes `message`: always their own, others' when their role may.
    public static func requireDelete(
        _ message: Message, actor: String, role: ParticipantRole, roles: ConversationRoles
    ) throws {
        guard message.sender != actor else { return }
        guard roles[role].canDeleteOthersMessages else {
            throw DomainError(.forbidden, "In this conversation a \(role.rawValue) may not delete others' messages.")
        }
    }

    /// `role` pins or unpins a message of a conversation of `type`: in a group when its role may, in a direct
    /// conversation either participant. (The app's server, with no role, always may.)
    public static func requirePin(role: ParticipantRole, type: ConversationType, roles: ConversationRoles) throws {
        guard type == .group else { return }
        guard roles[role].canPinMessages else {
            throw DomainError(.forbidden, "In this conversation a \(role.rawValue) may not pin messages.")
        }
    }

    /// `message` is pinned to a conversation that has `pins` pinned messages.
    public static func requirePinRoom(_ message: Message, pins: Int) throws {
        guard !message.isDeleted else { throw deleted(message.id) }
        guard pins < maxPinsPerConversation else {
            throw DomainError(
                .pinLimit, "A conversation has at most \(maxPinsPerConversation) pinned messages: unpin one first.")
        }
    }

    /// A reply's parent: a message of the conversation that is not deleted and not itself a reply.
    public static func requireReplyTarget(_ parent: Message?, id: String) throws {
        guard let parent else { throw notFound(id) }
        guard !parent.isDeleted else { throw deleted(id) }
        guard parent.replyTo == nil else {
            throw DomainError(.badRequest, "Message \(id) is a reply: reply to the first message of its thread.")
        }
    }

    /// A reaction `key` is added to `message`, which has `keys` distinct keys of which `own` are the actor's.
    public static func requireReactionRoom(_ message: Message, key: String, keys: Set<String>, own: Int) throws {
        guard !message.isDeleted else { throw deleted(message.id) }
        if !keys.contains(key) && keys.count >= maxReactionKeysPerMessage {
            throw DomainError(
                .reactionLimit, "Message \(message.id) already has \(maxReactionKeysPerMessage) different reactions."
            )
        }
        if own >= maxReactionKeysPerUser {
            throw DomainError(
                .reactionLimit, "A participant may give one message at most \(maxReactionKeysPerUser) reactions."
            )
        }
    }

    public static func notFound(_ id: String) -> DomainError {
        DomainError(.messageNotFound, "No message \(id) in this conversation.")
    }

    public static func deleted(_ id: String) -> DomainError {
        DomainError(.messageDeleted, "Message \(id) was deleted.")
    }

    // MARK: Changes

    /// The mentions a message keeps: each requested uid once, in order, when it is a participant other than the
    /// sender; nil when none is left.
    public static func keptMentions(_ requested: [String]?, sender: String, isParticipant: (String) -> Bool)
        -> [String]?
    {
        guard let requested else { return nil }
        var seen = Set<String>()
        let kept = requested.filter { $0 != sender && isParticipant($0) && seen.insert($0).inserted }
        return kept.isEmpty ? nil : kept
    }

    /// `message` after an edit; nil when the edit changes nothing (a repeat: no event).
    ///
    /// - Parameters:
    ///   - metadata: Replaces the metadata when present.
    ///   - mentions: The kept mentions (``keptMentions(_:sender:isParticipant:)``) when the edit names any; `.none`
    ///     keeps the message's own.
    public static func edited(
        _ message: Message, parts: [MessagePart], metadata: JSONValue?, mentions: [String]??, at now: Int64
    ) -> Message? {
        var edited = message.stored
        edited.parts = parts
        if let metadata { edited.metadata = metadata }
        if let mentions { edited.mentions = mentions }
        guard edited != message.stored else { return nil }
        edited.editedAt = max(now, message.sentAt)
        return edited
    }

    /// The uploads an edit names, keeps, adds and drops.
    public struct FileChange: Sendable {
        /// The uploads the new parts name, in order.
        public var named: [String]
        /// Those the message carries already.
        public var kept: Set<String>
        /// Named and not carried yet: the message takes them.
        public var added: [String]
        /// Carried and not named any more: they are removed.
        public var dropped: [String]

        public init(from old: [MessagePart], to new: [MessagePart]) {
            let before = Attachments.ids(in: old)
            let after = Attachments.ids(in: new)
            let carried = Set(before)
            let now = Set(after)
            named = after
            kept = carried
            added = after.filter { !carried.contains($0) }
            dropped = before.filter { !now.contains($0) }
        }
    }

    /// An edited message, with what it keeps of its earlier version (metadata, alert), is within `limits`.
    public static func requireWithinLimits(_ message: Message, _ limits: MessageLimits) throws {
        guard let violation = limits.violation(parts: message.parts, metadata: message.metadata, alert: message.alert)
        else { return }
        let explanation =
            violation == .messageEmpty
            ? "A message needs a non-empty text part or a data part."
            : "With what it keeps (metadata, alert), the edited message is past \(limits.maxParts) parts or \(limits.maxBytes) bytes."
        throw DomainError(violation, explanation)
    }

    /// What remains of a deleted message: its place (id, seq, sender, client id, `sentAt`, `replyTo`), when and by
    /// whom it was deleted, nothing of its content.
    /// `actor` nil: the app's server deleted it (`deletedBy` absent).
    public static func tombstone(of message: Message, by actor: String?, at now: Int64) -> Message {
        Message(
            id: message.id, conversationId: message.conversationId, seq: message.seq, sender: message.sender,
            clientMessageId: message.clientMessageId, parts: [], sentAt: message.sentAt, replyTo: message.replyTo,
            deletedAt: max(now, message.sentAt), deletedBy: actor, silent: message.silent, system: message.system
        )
    }

    /// A stored event's body without `uid` as its `createdBy` (a deleted user's erased message).
    public static func withoutCreator(_ body: some Collection<UInt8>, uid: String) throws -> [UInt8] {
        var event = try JSONDecoder().decode(Event.self, from: Data(body))
        if event.context.createdBy == uid { event.context.createdBy = nil }
        return try WireJSON.encode(event)
    }

    /// A stored message event's body (`sent`, `update` or `delete`) with its payload replaced by `message`, the rest
    /// (id, seq, timestamp, context) as it was.
    public static func rewritten(_ body: some Collection<UInt8>, to message: Message) throws -> [UInt8] {
        var event = try JSONDecoder().decode(Event.self, from: Data(body))
        switch event.payload {
        case .messageSent: event.payload = .messageSent(message)
        case .messageUpdated: event.payload = .messageUpdated(message)
        case .messageDeleted: event.payload = .messageDeleted(message)
        default: throw DomainError(.internalError, "Stored event \(event.id) is not about a message.")
        }
        return try WireJSON.encode(event)
    }

    /// The message in a stored event body.
    public static func message(in body: some Collection<UInt8>, decoder: JSONDecoder = JSONDecoder()) throws
        -> Message
    {
        let event = try decoder.decode(Event.self, from: Data(body))
        guard let message = event.payload.message else {
            throw DomainError(.internalError, "Stored event \(event.id) is not a message.")
        }
        return message
    }

    /// A reaction key: 1 to ``maxReactionKeyBytes`` bytes, no whitespace or control character.
    public static func isValidReactionKey(_ key: String) -> Bool {
        (1...maxReactionKeyBytes).contains(key.utf8.count)
            && !key.unicodeScalars.contains {
                $0.properties.isWhitespace || $0.value < 0x20 || (0x7F...0x9F).contains($0.value)
            }
    }
}

/// One key's reactions on a message as stored: how many, whether the reader is among them, and when it was first
/// given (the order keys are listed in).
public struct ReactionRow: Sendable, Hashable {
    public var messageSeq: Int64
    public var key: String
    public var count: Int
    public var reacted: Bool
    public var firstAt: Int64

    public init(messageSeq: Int64, key: String, count: Int, reacted: Bool, firstAt: Int64) {
        self.messageSeq = messageSeq
        self.key = key
        self.count = count
        self.reacted = reacted
        self.firstAt = firstAt
    }

    /// Summaries per message, keys ordered by when they were first given (then by key).
    public static func summaries(_ rows: [ReactionRow]) -> [Int64: [ReactionSummary]] {
        Dictionary(grouping: rows, by: \.messageSeq).mapValues { rows in
            rows.sorted { ($0.firstAt, $0.key) < ($1.firstAt, $1.key) }
                .map { ReactionSummary(key: $0.key, count: $0.count, reacted: $0.reacted) }
        }
    }
}

/// A thread's summary as stored: replies not deleted, and when the latest reply (deleted or not) was sent.
public struct ThreadSummary: Sendable, Hashable {
    public var replyCount: Int
    public var lastReplyAt: Int64?

    public init(replyCount: Int, lastReplyAt: Int64?) {
        self.replyCount = replyCount
        self.lastReplyAt = lastReplyAt
    }
}

/// A message's row in `pins`: who pinned it and when (the message it belongs to names itself).
public struct PinRow: Sendable, Hashable {
    public var pinnedBy: String?
    public var pinnedAt: Int64

    public init(pinnedBy: String?, pinnedAt: Int64) {
        self.pinnedBy = pinnedBy
        self.pinnedAt = pinnedAt
    }
}

extension Message {
    /// The message as `viewer` reads it: with its thread's summary, its reactions and its pin.
    public func reading(thread: ThreadSummary?, reactions: [ReactionSummary]?, pin: PinRow?) -> Message {
        var message = stored
        message.pin = pin.map {
            MessagePin(messageId: id, messageSeq: seq, pinnedBy: $0.pinnedBy, pinnedAt: $0.pinnedAt)
        }
        if let thread, thread.lastReplyAt != nil {
            message.replyCount = thread.replyCount > 0 ? thread.replyCount : nil
            message.lastReplyAt = thread.lastReplyAt
        }
        message.reactions = reactions.flatMap { $0.isEmpty ? nil : $0 }
        return message
    }
}
