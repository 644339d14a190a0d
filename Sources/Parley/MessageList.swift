import Foundation
import NIOConcurrencyHelpers

/// A conversation's messages (or one thread's), kept in their latest state as events arrive: new messages are added,
/// edits and deletions replace a message, reactions and replies update the counts a message shows. What a chat screen
/// shows, without writing the rules of each event.
///
/// ```swift
/// let list = try await client.messageList(conversationId: id)
/// for await messages in list.updates() { render(messages) }
/// ```
///
/// The list starts with the newest page of history (``ParleyClient/fetchMessages(conversationId:limit:cursor:)``) and
/// applies every later event of the conversation; ``loadOlder()`` adds older pages. An event the server had already
/// applied when a page was read is not applied again to that page's messages (each page carries the `lastSeq` it was
/// read at), so counts never go twice. After `parley.resyncRequired` the list reloads its newest page.
///
/// Opened around a message (``ParleyClient/messageList(conversationId:around:pageSize:)``: a push's, a mention's, a
/// search result's), the list holds a window that may not reach the newest message: ``hasNewer`` is true and
/// ``loadNewer()`` adds the next newer page. New messages wait until the window reaches the end (they would stand
/// after a gap); edits, deletions and reactions of the messages held apply at once.
public final class MessageList: Sendable {
    /// The conversation the list shows.
    public let conversationId: String
    /// The first message of the thread this list shows; nil for the whole conversation.
    public let thread: String?

    private struct State {
        var timeline: MessageTimeline
        /// Events that arrived before the first page: applied once it is in.
        var early: [Event] = []
        var loaded = false
        var nextCursor: String?
        /// A window opened around a message: the position after which the next newer page starts.
        var newerCursor: String?
        /// New messages that came while the window did not reach the end: applied once it does.
        var held: [Event] = []
        /// More came than ``MessageList/heldLimit``: the end is read again as the newest page instead.
        var heldOverflow = false
        var streams: [UUID: AsyncStream<[Message]>.Continuation] = [:]
        var task: Task<Void, Never>?
    }

    private let client: ParleyClient
    private let pageSize: Int
    private let state: NIOLockedValueBox<State>

    init(client: ParleyClient, conversationId: String, thread: String?, viewer: String, pageSize: Int) {
        self.client = client
        self.conversationId = conversationId
        self.thread = thread
        self.pageSize = pageSize
        self.state = NIOLockedValueBox(State(timeline: MessageTimeline(viewer: viewer, thread: thread)))
    }

    /// The messages, in ascending sequence order.
    public var messages: [Message] { state.withLockedValue { $0.timeline.messages } }

    /// The thread's first message (thread lists only), in its latest state.
    public var parent: Message? { state.withLockedValue { $0.timeline.parent } }

    /// Whether older messages remain to load.
    public var hasOlder: Bool { state.withLockedValue { $0.nextCursor != nil } }

    /// Whether newer messages remain to load (a list opened around a message, until ``loadNewer()`` reaches the end).
    public var hasNewer: Bool { state.withLockedValue { $0.newerCursor != nil } }

    /// New messages held while the window does not reach the end; past this many, reaching the end reloads the newest
    /// page instead of applying them.
    static let heldLimit = 1_000

    /// The messages after every change from now on (the current ones first).
    public func updates() -> AsyncStream<[Message]> {
        let (stream, continuation) = AsyncStream.makeStream(of: [Message].self, bufferingPolicy: .bufferingNewest(1))
        let key = UUID()
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLockedValue { $0.streams.removeValue(forKey: key) }
        }
        let current = state.withLockedValue { state -> [Message] in
            state.streams[key] = continuation
            return state.timeline.messages
        }
        continuation.yield(current)
        return stream
    }

    /// Loads the next older page; does nothing when there is none.
    public func loadOlder() async throws {
        guard let cursor = state.withLockedValue({ $0.nextCursor }) else { return }
        let page = try await fetch(cursor: cursor)
        publish { state in
            state.timeline.load(page, older: true)
            state.nextCursor = page.nextCursor
        }
        if thread == nil { client.offline.merge(page, of: conversationId) }
    }

    /// Loads the next newer page of a list opened around a message; does nothing once the list reaches the newest
    /// message. Reaching it applies the messages that came meanwhile.
    public func loadNewer() async throws {
        guard let cursor = state.withLockedValue({ $0.newerCursor }), let after = Int64(cursor) else { return }
        let page = Self.visible(
            try await client.fetchMessages(conversationId: conversationId, after: after, limit: pageSize), to: client
        )
        let overflowed = publish { state -> Bool in
            state.timeline.load(page, older: false)
            state.newerCursor = page.newerCursor
            guard state.newerCursor == nil else { return false }
            if state.heldOverflow { return true }
            for event in state.held { state.timeline.apply(event) }
            state.held = []
            return false
        }
        if overflowed { try await reload(around: nil) }
    }

    /// Stops following the conversation and ends the update streams.
    public func close() {
        let (task, streams) = state.withLockedValue { state in
            defer {
                state.task = nil
                state.streams = [:]
            }
            return (state.task, Array(state.streams.values))
        }
        task?.cancel()
        for stream in streams { stream.finish() }
    }

    deinit {
        close()
    }

    // MARK: Following

    /// Subscribes to the conversation's events, then loads the newest page (or the page around `seq`).
    func start(around seq: Int64? = nil) async throws {
        let events = client.events(conversationId: conversationId)
        let task = Task { [weak self] in
            for await event in events {
                guard let self else { return }
                await self.receive(event)
            }
        }
        state.withLockedValue { $0.task = task }
        try await reload(around: seq)
    }

    private func receive(_ event: Event) async {
        if case .resyncRequired = event.payload {
            try? await reload(around: nil)
            return
        }
        publish { state in
            guard state.loaded else {
                state.early.append(event)
                return
            }
            Self.take(event, into: &state)
        }
    }

    /// Applies an event to a loaded list, or holds a new message while the window does not reach the end.
    private static func take(_ event: Event, into state: inout State) {
        if state.newerCursor != nil, case .messageSent = event.payload {
            if state.held.count < heldLimit {
                state.held.append(event)
            } else {
                state.heldOverflow = true
            }
            return
        }
        state.timeline.apply(event)
    }

    /// Replaces the list with the newest page (or the page around `seq`), then applies the events that came meanwhile.
    private func reload(around seq: Int64?) async throws {
        // Events from now on wait for the page (those it already includes are then skipped).
        state.withLockedValue { $0.loaded = false }
        let page: MessagePage
        if let seq, thread == nil {
            page = Self.visible(
                try await client.fetchMessages(conversationId: conversationId, around: seq, limit: pageSize),
                to: client
            )
        } else {
            page = try await fetch(cursor: nil)
        }
        publish { state in
            state.timeline.reset()
            state.timeline.load(page, older: false)
            state.nextCursor = page.nextCursor
            state.newerCursor = page.newerCursor
            state.held = []
            state.heldOverflow = false
            state.loaded = true
            for event in state.early { Self.take(event, into: &state) }
            state.early = []
        }
        if thread == nil, page.newerCursor == nil { client.offline.merge(page, of: conversationId) }
    }

    /// A page, without the messages of users the reader blocked (unless the settings show them).
    private func fetch(cursor: String?) async throws -> MessagePage {
        let page =
            if let thread {
                try await client.fetchReplies(to: thread, in: conversationId, limit: pageSize, cursor: cursor)
            } else {
                try await client.fetchMessages(conversationId: conversationId, limit: pageSize, cursor: cursor)
            }
        return Self.visible(page, to: client)
    }

    /// `page` without the messages of users the reader blocked (unless the settings show them).
    private static func visible(_ page: MessagePage, to client: ParleyClient) -> MessagePage {
        guard client.settings.hidesBlockedUsersMessages else { return page }
        let blocked = client.blockedUsers.withLockedValue { $0 }
        guard !blocked.isEmpty else { return page }
        var page = page
        page.messages.removeAll { blocked.contains($0.sender) }
        return page
    }

    /// Changes the state and sends the messages to the update streams; returns what `change` returned.
    @discardableResult
    private func publish<Result>(_ change: (inout State) -> Result) -> Result {
        let (result, messages, streams) = state.withLockedValue { state in
            let result = change(&state)
            return (result, state.timeline.messages, Array(state.streams.values))
        }
        for stream in streams { stream.yield(messages) }
        return result
    }
}

extension ParleyClient {
    /// A list of a conversation's messages (or, with `thread`, of the replies to that message) that follows the
    /// conversation's events: see ``MessageList``. Close it when the screen goes away.
    public func messageList(conversationId: String, thread: String? = nil, pageSize: Int = 50) async throws
        -> MessageList
    {
        try await messageList(conversationId: conversationId, thread: thread, around: nil, pageSize: pageSize)
    }

    /// A list of a conversation's messages opened around message `seq` (a push's, a mention's, a search result's):
    /// about half a page at or before it, the rest after it; ``MessageList/loadNewer()`` and
    /// ``MessageList/loadOlder()`` widen it. Close it when the screen goes away.
    public func messageList(conversationId: String, around seq: Int64, pageSize: Int = 50) async throws -> MessageList {
        try await messageList(conversationId: conversationId, thread: nil, around: seq, pageSize: pageSize)
    }

    private func messageList(conversationId: String, thread: String?, around seq: Int64?, pageSize: Int) async throws
        -> MessageList
    {
        let session = try requireSession()
        let list = MessageList(
            client: self, conversationId: conversationId, thread: thread, viewer: session.user.uid, pageSize: pageSize
        )
        do {
            try await list.start(around: seq)
        } catch {
            list.close()
            throw error
        }
        return list
    }
}

/// The messages of a list as a reader sees them, and how each event changes them: the rules ``MessageList`` applies.
///
/// - `conversationMessage.sent`: a new message is added (a thread list adds only replies to its thread); the message
///   it replies to counts one more reply.
/// - `conversationMessage.update`: the message takes the new content (its reactions, pin and thread summary stay).
/// - `conversationMessage.delete`: the message becomes what remains of it and loses its reactions and pin; the
///   message it replied to counts one reply less.
/// - `conversationMessage.reactionAdded` / `reactionRemoved`: the key's count becomes the event's; `reacted` follows
///   the reader's own reactions.
/// - `conversationMessage.pinned` / `unpinned`: the message's `Message.pin` is set or cleared.
///
/// An event applies to a message only when its `seq` is above the position the message was read at.
struct MessageTimeline: Sendable, Hashable, Codable {
    let viewer: String
    let thread: String?
    private(set) var messages: [Message] = []
    private(set) var parent: Message?
    /// The sequence number each message's state includes: the page's `lastSeq`, or the event that added it.
    private var readAt: [String: Int64] = [:]
    /// The newest page's `lastSeq`: a new message at or below it is on that page or older.
    private var newest: Int64 = 0

    init(viewer: String, thread: String?) {
        self.viewer = viewer
        self.thread = thread
    }

    mutating func reset() {
        messages = []
        parent = nil
        readAt = [:]
        newest = 0
    }

    /// Adds a page (ascending): the newest one, or an older one before the messages held.
    mutating func load(_ page: MessagePage, older: Bool) {
        let position = page.lastSeq ?? 0
        let known = Set(messages.map(\.id))
        let added = page.messages.filter { !known.contains($0.id) }
        for message in added { readAt[message.id] = position }
        messages = older ? added + messages : messages + added
        messages.sort { $0.seq < $1.seq }
        if let pageParent = page.parent, parent == nil || position > readAt[pageParent.id, default: 0] {
            parent = pageParent
            readAt[pageParent.id] = position
        }
        if !older { newest = max(newest, position) }
    }

    /// Takes a page read from the server into a timeline kept on the device (``OfflineStore``): a message it does not
    /// hold joins; one it holds takes the page's state when the page was read after the message last changed here.
    mutating func merge(_ page: MessagePage) {
        let position = page.lastSeq ?? 0
        var index = Dictionary(messages.enumerated().map { ($1.id, $0) }, uniquingKeysWith: { first, _ in first })
        for message in page.messages {
            if let at = index[message.id] {
                guard position > readAt[message.id, default: 0] else { continue }
                messages[at] = message
            } else {
                index[message.id] = messages.count
                messages.append(message)
            }
            readAt[message.id] = position
        }
        messages.sort { $0.seq < $1.seq }
        newest = max(newest, position)
    }

    /// Keeps the newest `limit` messages (the timeline of the offline store).
    mutating func keepNewest(_ limit: Int) {
        guard messages.count > limit else { return }
        let dropped = messages.prefix(messages.count - limit)
        for message in dropped { readAt.removeValue(forKey: message.id) }
        messages.removeFirst(dropped.count)
    }

    /// Applies one event of the conversation; returns whether anything changed.
    @discardableResult
    mutating func apply(_ event: Event) -> Bool {
        guard let seq = event.seq else { return false }
        switch event.payload {
        case .messageSent(let message):
            guard seq > newest, !messages.contains(where: { $0.id == message.id }) else { return false }
            var changed = false
            if let replyTo = message.replyTo {
                changed = update(replyTo, at: seq) { parent in
                    parent.replyCount = (parent.replyCount ?? 0) + 1
                    parent.lastReplyAt = max(parent.lastReplyAt ?? 0, message.sentAt)
                }
            }
            guard thread == nil || message.replyTo == thread else { return changed }
            messages.append(message.stored)
            readAt[message.id] = seq
            return true
        case .messageUpdated(let message):
            return update(message.id, at: seq) { current in
                let kept = current
                current = message.stored
                current.replyCount = kept.replyCount
                current.lastReplyAt = kept.lastReplyAt
                current.reactions = kept.reactions
                current.pin = kept.pin
            }
        case .messageDeleted(let message):
            var changed = update(message.id, at: seq) { current in
                let kept = current
                current = message.stored
                current.replyCount = kept.replyCount
                current.lastReplyAt = kept.lastReplyAt
            }
            if let replyTo = message.replyTo {
                changed =
                    update(replyTo, at: seq) { parent in
                        let count = (parent.replyCount ?? 0) - 1
                        parent.replyCount = count > 0 ? count : nil
                    } || changed
            }
            return changed
        case .reactionAdded(let reaction), .reactionRemoved(let reaction):
            let added: Bool
            if case .reactionAdded = event.payload { added = true } else { added = false }
            let mine = reaction.uid == viewer
            return update(reaction.messageId, at: seq) { message in
                var reactions = message.reactions ?? []
                if let index = reactions.firstIndex(where: { $0.key == reaction.key }) {
                    reactions[index].count = reaction.count
                    if mine { reactions[index].reacted = added }
                    if reaction.count <= 0 { reactions.remove(at: index) }
                } else if reaction.count > 0 {
                    reactions.append(ReactionSummary(key: reaction.key, count: reaction.count, reacted: mine && added))
                }
                message.reactions = reactions.isEmpty ? nil : reactions
            }
        case .messagePinned(let pin):
            return update(pin.messageId, at: seq) { $0.pin = pin }
        case .messageUnpinned(let pin):
            return update(pin.messageId, at: seq) { $0.pin = nil }
        default:
            return false
        }
    }

    /// Changes the message with this id (in the list, or the thread's parent) when `seq` is news to it.
    private mutating func update(_ id: String, at seq: Int64, _ change: (inout Message) -> Void) -> Bool {
        guard seq > readAt[id, default: Int64.max] else { return false }
        readAt[id] = seq
        if let index = messages.firstIndex(where: { $0.id == id }) {
            change(&messages[index])
            return true
        }
        if parent?.id == id, var message = parent {
            change(&message)
            parent = message
            return true
        }
        return false
    }
}
