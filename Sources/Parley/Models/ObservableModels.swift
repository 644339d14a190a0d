import Foundation
import NIOConcurrencyHelpers
import Observation

// SwiftUI-ready state, built only on the SDK's public API: a view holds a model and reads its properties; the model
// follows the client's streams on the main actor. Every model stops following when `stop()` is called or it is
// released.

/// The connection's status, for a banner or an indicator.
@MainActor @Observable public final class ConnectionModel {
    /// The connection status now.
    public private(set) var status: ConnectionStatus
    /// Whether the socket is connected.
    public var isConnected: Bool { status == .connected }

    @ObservationIgnored private let following = FollowingTasks()

    /// Follows `client`'s connection status from now on.
    public init(client: ParleyClient) {
        status = client.connectionStatus
        let updates = client.connectionStatusUpdates()
        following.add(
            Task { [weak self] in
                for await status in updates {
                    guard let self else { return }
                    self.status = status
                }
            })
    }

    /// Stops following the client.
    public func stop() { following.cancelAll() }

    deinit { following.cancelAll() }
}

/// The user's conversations, most recently active first (or those with unread messages first), each with its last
/// message, unread and mention counts: an inbox screen. One request a page (``load()``, then ``loadMore()``).
@MainActor @Observable public final class InboxModel {
    /// A row: the conversation, its newest message and the unread count.
    public typealias Entry = ConversationSummary

    /// In the model's sort.
    public private(set) var entries: [Entry] = []
    /// The unread total over every conversation.
    public private(set) var totalUnread = 0
    /// Whether the server has more conversations than ``entries`` (``loadMore()``).
    public private(set) var hasMore = false
    /// Whether ``load()`` or ``loadMore()`` is running.
    public private(set) var isLoading = false
    /// Whether ``entries`` are what the device kept (shown at once by ``load()``) rather than the server's answer:
    /// true until the server answers, and while it cannot be reached.
    public private(set) var isStored = false
    /// The last failure of ``load()`` or of following a change.
    public private(set) var error: ParleyError?

    @ObservationIgnored private let client: ParleyClient
    @ObservationIgnored private let following = FollowingTasks()
    @ObservationIgnored private var cursor: String?
    /// How many conversations a page reads.
    @ObservationIgnored public let limit: Int
    /// Which conversations the model lists.
    @ObservationIgnored public let filter: InboxFilter
    /// Their order.
    @ObservationIgnored public let sort: InboxSort

    /// A model of `client`'s inbox, reading `limit` conversations a page: those `filter` lists, in `sort` order.
    public init(client: ParleyClient, filter: InboxFilter = .init(), sort: InboxSort = .activity, limit: Int = 50) {
        self.client = client
        self.filter = filter
        self.sort = sort
        self.limit = limit
    }

    /// Shows what the device kept at once (the whole inbox only), then reads the first page from the server in one
    /// request, and follows the events that change it.
    public func load() async {
        isLoading = true
        defer { isLoading = false }
        let events = client.events()
        let whole = filter == InboxFilter() && sort == .activity
        if entries.isEmpty && whole {
            entries = client.storedConversations()
            totalUnread = entries.reduce(0) { $0 + $1.unread }
            isStored = true
        }
        var failed = false
        do {
            let page = try await client.inboxPage(filter: filter, sort: sort, limit: limit)
            entries = page.entries.map(Entry.init)
            if whole { client.offline.replaceConversations(entries) }
            totalUnread = page.totalUnread
            cursor = page.nextCursor
            hasMore = cursor != nil
            isStored = false
            error = nil
        } catch {
            self.error = RESTClient.parleyError(error)
            failed = true
        }
        following.cancelAll()
        if failed { following.add(reloadOnReconnect(client) { [weak self] in await self?.load() }) }
        following.add(
            Task { [weak self] in
                for await event in events {
                    guard let self else { return }
                    await self.apply(event)
                }
            })
    }

    /// Adds the next page (nothing when there is none).
    public func loadMore() async {
        guard let cursor, !isLoading else { return }
        isLoading = true
        defer { isLoading = false }
        do {
            let page = try await client.inboxPage(filter: filter, sort: sort, limit: limit, cursor: cursor)
            // A conversation already shown (it moved while paging) keeps its row.
            let shown = Set(entries.map(\.id))
            entries += page.entries.filter { !shown.contains($0.id) }.map(Entry.init)
            totalUnread = page.totalUnread
            self.cursor = page.nextCursor
            hasMore = page.nextCursor != nil
        } catch {
            self.error = RESTClient.parleyError(error)
        }
    }

    /// Archives a conversation: it leaves the list (and comes back with its next message).
    public func archive(_ conversationId: String) async {
        do {
            try await client.archiveConversation(id: conversationId)
            if !filter.archived { entries.removeAll { $0.id == conversationId } }
        } catch {
            self.error = RESTClient.parleyError(error)
        }
    }

    private func apply(_ event: Event) async {
        switch event.payload {
        case .messageSent(let message) where filter.archived:
            // A new message brings an archived conversation back to the inbox: out of this list.
            entries.removeAll { $0.id == message.conversationId }
        case .messageSent(let message), .messageUpdated(let message), .messageDeleted(let message):
            if let index = entries.firstIndex(where: { $0.id == message.conversationId }) {
                // An edit or a deletion of the last message shows; an older one's does not.
                if (entries[index].lastMessage?.seq ?? 0) <= message.seq { entries[index].lastMessage = message }
            } else if case .messageSent = event.payload {
                await insert(conversationId: message.conversationId)
            }
        case .conversationCreated(let conversation):
            let listed =
                !filter.unreadOnly && !filter.mentionsOnly && !filter.archived
                && (filter.type == nil || filter.type == conversation.type)
            if listed && !entries.contains(where: { $0.id == conversation.id }) {
                entries.append(Entry(conversation: conversation, lastMessage: nil, unread: 0))
            }
        case .conversationUpdated(let conversation), .conversationUndeleted(let conversation):
            if let index = entries.firstIndex(where: { $0.id == conversation.id }) {
                entries[index].conversation = conversation
            } else {
                await insert(conversationId: conversation.id)
            }
        case .conversationDeleted(let conversation):
            entries.removeAll { $0.id == conversation.id }
        case .participantRemoved(let participant):
            if participant.uid == client.getLoggedInUser()?.uid, let id = event.conversationId {
                entries.removeAll { $0.id == id }
            }
        case .unreadUpdated(let unread):
            totalUnread = unread.total
            for change in unread.conversations {
                if let index = entries.firstIndex(where: { $0.id == change.conversationId }) {
                    entries[index].unread = change.unread
                    // Read up to a position: the mentions before it are read too.
                    if change.unread == 0 { entries[index].unreadMentions = 0 }
                }
            }
            // A filter on unread messages or mentions drops what was read.
            if filter.unreadOnly { entries.removeAll { $0.unread == 0 } }
            if filter.mentionsOnly { entries.removeAll { $0.unreadMentions == 0 } }
        default:
            return
        }
        entries = sorted(entries)
    }

    /// A conversation the list did not have (a first message in it, or it came back): its row, in one request, when the
    /// model's filter lists it (the server applies the filter; a message brings an archived conversation back, so an
    /// archived list never gains one).
    private func insert(conversationId: String) async {
        guard !filter.archived else { return }
        var one = filter
        one.conversationId = conversationId
        do {
            let page = try await client.inboxPage(filter: one, sort: sort, limit: 1)
            guard let found = page.entries.first, !entries.contains(where: { $0.id == conversationId }) else { return }
            let entry = Entry(found)
            client.offline.add(entry)
            entries.append(entry)
            entries = sorted(entries)
        } catch {
            self.error = RESTClient.parleyError(error)
        }
    }

    private func sorted(_ entries: [Entry]) -> [Entry] {
        switch sort {
        case .activity: return ConversationSummary.byActivity(entries)
        case .unread:
            return ConversationSummary.byActivity(entries).enumerated().sorted {
                ($0.element.unread > 0 ? 0 : 1, $0.offset) < ($1.element.unread > 0 ? 0 : 1, $1.offset)
            }.map(\.element)
        }
    }

    /// Stops following the client.
    public func stop() { following.cancelAll() }

    deinit { following.cancelAll() }
}

/// One row of a conversation or a thread: a stored message, or a send of the user's the server has not stored yet.
public struct ConversationItem: Sendable, Hashable, Identifiable {
    /// What the row shows.
    public enum Content: Sendable, Hashable {
        /// A message as stored, in its latest state.
        case message(Message)
        /// A send waiting in the outbox (``OutgoingMessage/State/pending``) or refused (``OutgoingMessage/State/failed(code:message:)``).
        case pending(OutgoingMessage)
    }

    /// Stable over a send's life: a row keeps its id from the outbox to the stored message (the sender and the client
    /// message id), so a list does not redraw it as a new row. Messages without a client message id use their id.
    public let id: String
    /// The message or the pending send.
    public let content: Content

    /// The stored message, when the row is one.
    public var message: Message? {
        if case .message(let message) = content { return message }
        return nil
    }

    /// The pending send, when the row is one.
    public var pending: OutgoingMessage? {
        if case .pending(let entry) = content { return entry }
        return nil
    }

    static func key(sender: String, clientMessageId: String) -> String { "\(sender)/\(clientMessageId)" }

    init(_ message: Message) {
        id = message.clientMessageId.map { Self.key(sender: message.sender, clientMessageId: $0) } ?? message.id
        content = .message(message)
    }

    init(_ entry: OutgoingMessage, sender: String) {
        id = Self.key(sender: sender, clientMessageId: entry.clientMessageId)
        content = .pending(entry)
    }
}

/// One conversation's messages in order (or one thread's replies), with the user's sends in place until the server
/// stores them, who is typing and how far each participant has read: a chat screen, or a thread's.
///
/// ``items`` is what a list shows: the messages, then the user's pending and failed sends at the end, each replaced by
/// its stored message (same ``ConversationItem/id``) once the server has it. A model opened around a message
/// (``load(pageSize:around:)``) holds a window of the history: ``loadOlder()`` and ``loadNewer()`` widen it, and the
/// pending sends show once it reaches the newest message.
@MainActor @Observable public final class ConversationModel {
    /// The conversation shown.
    public let conversationId: String
    /// The first message of the thread shown (its replies are the model's messages); nil for the whole conversation.
    public let thread: String?
    /// The stored messages (the thread's replies), in ascending sequence order, each in its latest state.
    public private(set) var messages: [Message] = []
    /// The thread's first message in its latest state (thread models only).
    public private(set) var parent: Message?
    /// The user's sends to this conversation (this thread) not stored yet: pending (being sent or waiting for the
    /// network) and failed, oldest first (``OutgoingMessage/state``).
    public private(set) var outgoing: [OutgoingMessage] = []
    /// The participants typing now (not the user).
    public private(set) var typing: [String] = []
    /// Each other participant's read position (`seq`), as the read receipts report it.
    public private(set) var readUpTo: [String: Int64] = [:]
    /// Whether older messages remain (``loadOlder()``).
    public private(set) var hasOlder = false
    /// Whether newer messages remain (a model opened around a message, until ``loadNewer()`` reaches the end).
    public private(set) var hasNewer = false
    /// Whether a load (``load(pageSize:around:)``, ``loadOlder()``, ``loadNewer()``) is running.
    public private(set) var isLoading = false
    /// Whether ``messages`` are what the device kept (shown at once by ``load(pageSize:around:)``) rather than the
    /// server's: true until the server answers, and while it cannot be reached.
    public private(set) var isStored = false
    /// The last failure of a load, a send or of following a change.
    public private(set) var error: ParleyError?
    /// Sends the outbox reported stored whose message the list has not shown yet: shown in their place meanwhile.
    private var justSent: [Message] = []

    /// The rows to show: ``messages``, then (once the model reaches the newest message) the user's sends the list does
    /// not hold yet, in place at the end: stored ones as their message, the others (``outgoing``) as pending.
    public var items: [ConversationItem] {
        var items = messages.map(ConversationItem.init)
        guard !hasNewer else { return items }
        let viewer = client.getLoggedInUser()?.uid ?? ""
        var shown = Set(items.map(\.id))
        let sends = justSent.map(ConversationItem.init) + outgoing.map { ConversationItem($0, sender: viewer) }
        for item in sends where shown.insert(item.id).inserted { items.append(item) }
        return items
    }

    @ObservationIgnored private let client: ParleyClient
    @ObservationIgnored private var list: MessageList?
    @ObservationIgnored private let following = FollowingTasks()
    @ObservationIgnored private var pageSize = 50

    /// A model of one conversation of `client` (with `thread`, of the replies to that message); call
    /// ``load(pageSize:around:)`` to fill it.
    public init(client: ParleyClient, conversationId: String, thread: String? = nil) {
        self.client = client
        self.conversationId = conversationId
        self.thread = thread
    }

    /// Shows the messages the device kept at once (a conversation's newest), then reads the newest page, or the page
    /// around message `seq` (a push's, a mention's, a search result's; conversations only), and follows the
    /// conversation: messages, the outbox, typing and receipts.
    public func load(pageSize: Int = 50, around seq: Int64? = nil) async {
        isLoading = true
        defer { isLoading = false }
        stop()
        self.pageSize = pageSize
        let id = conversationId
        let thread = self.thread
        if messages.isEmpty, thread == nil, seq == nil {
            messages = client.storedMessages(conversationId: id)
            isStored = true
        }
        let events = client.events(
            names: [.participantTyping, .participantTypingOff, .messageRead], conversationId: id
        )
        let outbox = client.outboxUpdates()
        do {
            let list =
                if let seq, thread == nil {
                    try await client.messageList(conversationId: id, around: seq, pageSize: pageSize)
                } else {
                    try await client.messageList(conversationId: id, thread: thread, pageSize: pageSize)
                }
            self.list = list
            following.onCancel { list.close() }
            show(list)
            isStored = false
            error = nil
            let updates = list.updates()
            following.add(
                Task { [weak self] in
                    for await _ in updates {
                        guard let self else { return }
                        // The list's state now, not the snapshot the stream kept: a newer one may be in already
                        // (``loadOlder()`` reads it at once).
                        self.show(list)
                    }
                })
        } catch {
            self.error = RESTClient.parleyError(error)
            following.add(
                reloadOnReconnect(client) { [weak self] in await self?.load(pageSize: pageSize, around: seq) })
        }
        outgoing = client.outgoingMessages().filter { Self.isSend($0, to: id, thread: thread) }
        following.add(
            Task { [weak self] in
                for await entry in outbox where Self.isSend(entry, to: id, thread: thread) {
                    guard let self else { return }
                    self.take(entry)
                }
            })
        following.add(
            Task { [weak self] in
                for await event in events {
                    guard let self else { return }
                    self.apply(event)
                }
            })
    }

    /// Adds the next older page.
    public func loadOlder() async {
        await widen { try await $0.loadOlder() }
    }

    /// Adds the next newer page (a model opened around a message); does nothing once it holds the newest message.
    public func loadNewer() async {
        await widen { try await $0.loadNewer() }
    }

    private func widen(_ load: (MessageList) async throws -> Void) async {
        guard let list else { return }
        do {
            try await load(list)
            show(list)
        } catch {
            self.error = RESTClient.parleyError(error)
        }
    }

    private func show(_ list: MessageList) {
        messages = list.messages
        parent = list.parent
        hasOlder = list.hasOlder
        hasNewer = list.hasNewer
        if !justSent.isEmpty {
            let held = Set(messages.map(\.id))
            justSent.removeAll { held.contains($0.id) }
        }
    }

    /// Queues a text message (a reply, in a thread model) in the durable outbox: it shows in ``items`` at once, and
    /// in its place as stored once the server has it. A model opened around an older message goes to the newest one
    /// first, where the send shows.
    @discardableResult
    public func send(_ text: String) throws -> OutgoingMessage {
        let entry = try client.queueMessage(parts: [.text(text)], to: .conversation(conversationId), replyTo: thread)
        take(entry)
        if hasNewer {
            let pageSize = self.pageSize
            Task { await self.load(pageSize: pageSize) }
        }
        return entry
    }

    private static func isSend(_ entry: OutgoingMessage, to conversationId: String, thread: String?) -> Bool {
        guard case .send = entry.action, entry.receiver == .conversation(conversationId) else { return false }
        return thread == nil || entry.replyTo == thread
    }

    private func take(_ entry: OutgoingMessage) {
        switch entry.state {
        case .pending, .failed:
            if let index = outgoing.firstIndex(where: { $0.id == entry.id }) {
                outgoing[index] = entry
            } else {
                outgoing.append(entry)
            }
        case .sent(let message):
            outgoing.removeAll { $0.id == entry.id }
            if !messages.contains(where: { $0.id == message.id }) { justSent.append(message) }
        case .reacted, .cancelled:
            outgoing.removeAll { $0.id == entry.id }
        }
    }

    private func apply(_ event: Event) {
        switch event.payload {
        case .participantTyping(let indicator):
            if !typing.contains(indicator.uid) { typing.append(indicator.uid) }
        case .participantTypingOff(let indicator):
            typing.removeAll { $0 == indicator.uid }
        case .messageRead(let receipt):
            readUpTo[receipt.uid] = max(readUpTo[receipt.uid] ?? 0, receipt.seq)
        default:
            break
        }
    }

    /// Stops following the client.
    public func stop() { following.cancelAll() }

    deinit { following.cancelAll() }
}

/// A conversation's members with whether each is online and typing: a member list, or the header of a chat.
///
/// ``load()`` reads the participants and the presence of the first ``presenceLimit`` of them (eight requests at a
/// time), then follows the conversation: members added, changed, removed or banned, presence changes and typing.
@MainActor @Observable public final class MemberListModel {
    /// A member and what is known of them now.
    public struct Member: Sendable, Hashable, Identifiable {
        /// The participant: uid, role, when they joined, their read position.
        public var participant: Participant
        /// Whether they have a live connection (or are within the presence grace); false when not known.
        public var online: Bool
        /// When their last connection closed (epoch ms); nil while online or when not known.
        public var lastSeenAt: Int64?
        /// Whether they are typing in the conversation now.
        public var isTyping: Bool
        /// The member's uid.
        public var id: String { participant.uid }
    }

    /// The conversation shown.
    public let conversationId: String
    /// The members, online ones first, then by uid.
    public private(set) var members: [Member] = []
    /// Whether ``load()`` is running.
    public private(set) var isLoading = false
    /// The last failure of ``load()`` or of a presence read.
    public private(set) var error: ParleyError?
    /// How many members' presence ``load()`` reads (a request each); the rest start offline until an event says
    /// otherwise.
    public let presenceLimit: Int

    /// The members online now.
    public var onlineCount: Int { members.count { $0.online } }
    /// The members typing now.
    public var typing: [String] { members.filter(\.isTyping).map(\.id) }

    @ObservationIgnored private let client: ParleyClient
    @ObservationIgnored private let following = FollowingTasks()

    /// A model of the members of one conversation of `client`; call ``load()`` to fill it.
    public init(client: ParleyClient, conversationId: String, presenceLimit: Int = 200) {
        self.client = client
        self.conversationId = conversationId
        self.presenceLimit = max(0, presenceLimit)
    }

    /// Reads the members and their presence, and follows the conversation from then on.
    public func load() async {
        isLoading = true
        defer { isLoading = false }
        stop()
        let id = conversationId
        // Subscribed first: a change during the reads is applied after them, not lost.
        let events = client.events(
            names: [
                .participantAdded, .participantUpdated, .participantRemoved, .participantBanned, .participantTyping,
                .participantTypingOff, .presenceUpdate,
            ]
        )
        do {
            let participants = try await client.participants(of: id)
            let presences = await readPresence(of: participants.prefix(presenceLimit).map(\.uid))
            members = participants.map { participant in
                let presence = presences[participant.uid]
                return Member(
                    participant: participant, online: presence?.online ?? false, lastSeenAt: presence?.lastSeenAt,
                    isTyping: false
                )
            }
            sort()
            error = nil
        } catch {
            self.error = RESTClient.parleyError(error)
            following.add(reloadOnReconnect(client) { [weak self] in await self?.load() })
            return
        }
        following.add(
            Task { [weak self] in
                for await event in events {
                    guard let self else { return }
                    self.apply(event)
                }
            })
    }

    /// Presence of `uids`, eight reads at a time; a failed read leaves its user out (and sets ``error``).
    private func readPresence(of uids: [String]) async -> [String: Presence] {
        let client = self.client
        var found: [String: Presence] = [:]
        var failure: ParleyError?
        await withTaskGroup(of: Result<Presence, ParleyError>.self) { group in
            var next = uids.makeIterator()
            func start() {
                guard let uid = next.next() else { return }
                group.addTask {
                    do { return .success(try await client.presence(of: uid)) } catch {
                        return .failure(RESTClient.parleyError(error))
                    }
                }
            }
            for _ in 0..<8 { start() }
            for await result in group {
                switch result {
                case .success(let presence): found[presence.uid] = presence
                case .failure(let error): failure = error
                }
                start()
            }
        }
        if let failure { error = failure }
        return found
    }

    private func apply(_ event: Event) {
        switch event.payload {
        case .participantAdded(let participant), .participantUpdated(let participant):
            guard event.conversationId == conversationId else { return }
            if let index = members.firstIndex(where: { $0.id == participant.uid }) {
                members[index].participant = participant
            } else {
                members.append(Member(participant: participant, online: false, lastSeenAt: nil, isTyping: false))
                let uid = participant.uid
                Task { [weak self, client] in
                    guard let presence = try? await client.presence(of: uid) else { return }
                    self?.update(uid) {
                        $0.online = presence.online
                        $0.lastSeenAt = presence.lastSeenAt
                    }
                }
            }
            sort()
        case .participantRemoved(let participant):
            guard event.conversationId == conversationId else { return }
            members.removeAll { $0.id == participant.uid }
        case .participantBanned(let ban):
            guard event.conversationId == conversationId else { return }
            members.removeAll { $0.id == ban.uid }
        case .participantTyping(let indicator), .participantTypingOff(let indicator):
            guard event.conversationId == conversationId else { return }
            let typing: Bool
            if case .participantTyping = event.payload { typing = true } else { typing = false }
            update(indicator.uid) { $0.isTyping = typing }
        case .presenceUpdated(let presence):
            update(presence.uid) {
                $0.online = presence.online
                $0.lastSeenAt = presence.lastSeenAt
                if !presence.online { $0.isTyping = false }
            }
        default:
            break
        }
    }

    private func update(_ uid: String, _ change: (inout Member) -> Void) {
        guard let index = members.firstIndex(where: { $0.id == uid }) else { return }
        let before = members[index]
        change(&members[index])
        if members[index].online != before.online { sort() }
    }

    private func sort() {
        members.sort { ($0.online ? 0 : 1, $0.id) < ($1.online ? 0 : 1, $1.id) }
    }

    /// Stops following the client.
    public func stop() { following.cancelAll() }

    deinit { following.cancelAll() }
}

/// After a failed load (no network, say): loads again once the socket next connects, in a task of its own (a load
/// cancels the tasks it replaces, this one among them).
@MainActor private func reloadOnReconnect(
    _ client: ParleyClient, _ load: @escaping @MainActor () async -> Void
) -> Task<Void, Never> {
    let statuses = client.connectionStatusUpdates()
    return Task {
        for await status in statuses where status == .connected {
            Task { await load() }
            return
        }
    }
}

/// The tasks a model follows the client with, cancelled together (also from `deinit`, which is not on the main actor).
final class FollowingTasks: Sendable {
    private let state = NIOLockedValueBox<(tasks: [Task<Void, Never>], cleanups: [@Sendable () -> Void])>(([], []))

    func add(_ task: Task<Void, Never>) { state.withLockedValue { $0.tasks.append(task) } }

    /// Runs `cleanup` at the next ``cancelAll()``.
    func onCancel(_ cleanup: @escaping @Sendable () -> Void) { state.withLockedValue { $0.cleanups.append(cleanup) } }

    func cancelAll() {
        let (tasks, cleanups) = state.withLockedValue { state in
            defer { state = ([], []) }
            return state
        }
        for task in tasks { task.cancel() }
        for cleanup in cleanups { cleanup() }
    }
}
