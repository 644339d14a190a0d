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

/// One conversation's messages in order, with what the user sent that the server has not stored yet, who is typing
/// and how far each participant has read: a chat screen.
@MainActor @Observable public final class ConversationModel {
    /// The conversation shown.
    public let conversationId: String
    /// The stored messages, in ascending sequence order, each in its latest state.
    public private(set) var messages: [Message] = []
    /// The user's sends to this conversation not stored yet: pending (being sent or waiting for the network) and
    /// failed, oldest first (``OutgoingMessage/state``).
    public private(set) var outgoing: [OutgoingMessage] = []
    /// The participants typing now (not the user).
    public private(set) var typing: [String] = []
    /// Each other participant's read position (`seq`), as the read receipts report it.
    public private(set) var readUpTo: [String: Int64] = [:]
    /// Whether older messages remain (``loadOlder()``).
    public private(set) var hasOlder = false
    /// Whether a load (``load(pageSize:)``, ``loadOlder()``) is running.
    public private(set) var isLoading = false
    /// Whether ``messages`` are what the device kept (shown at once by ``load(pageSize:)``) rather than the server's:
    /// true until the server answers, and while it cannot be reached.
    public private(set) var isStored = false
    /// The last failure of a load, a send or of following a change.
    public private(set) var error: ParleyError?

    @ObservationIgnored private let client: ParleyClient
    @ObservationIgnored private var list: MessageList?
    @ObservationIgnored private let following = FollowingTasks()

    /// A model of one conversation of `client`; call ``load(pageSize:)`` to fill it.
    public init(client: ParleyClient, conversationId: String) {
        self.client = client
        self.conversationId = conversationId
    }

    /// Shows the messages the device kept at once, then reads the newest page and follows the conversation: messages,
    /// the outbox, typing and receipts.
    public func load(pageSize: Int = 50) async {
        isLoading = true
        defer { isLoading = false }
        stop()
        let id = conversationId
        if messages.isEmpty {
            messages = client.storedMessages(conversationId: id)
            isStored = true
        }
        let events = client.events(
            names: [.participantTyping, .participantTypingOff, .messageRead], conversationId: id
        )
        let outbox = client.outboxUpdates()
        do {
            let list = try await client.messageList(conversationId: id, pageSize: pageSize)
            self.list = list
            following.onCancel { list.close() }
            messages = list.messages
            hasOlder = list.hasOlder
            isStored = false
            error = nil
            let updates = list.updates()
            following.add(
                Task { [weak self] in
                    for await _ in updates {
                        guard let self else { return }
                        // The list's state now, not the snapshot the stream kept: a newer one may be in already
                        // (``loadOlder()`` reads it at once).
                        self.messages = list.messages
                        self.hasOlder = list.hasOlder
                    }
                })
        } catch {
            self.error = RESTClient.parleyError(error)
            following.add(reloadOnReconnect(client) { [weak self] in await self?.load(pageSize: pageSize) })
        }
        outgoing = client.outgoingMessages().filter { Self.isSend($0, to: id) }
        following.add(
            Task { [weak self] in
                for await entry in outbox where Self.isSend(entry, to: id) {
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
        guard let list else { return }
        do {
            try await list.loadOlder()
            messages = list.messages
            hasOlder = list.hasOlder
        } catch {
            self.error = RESTClient.parleyError(error)
        }
    }

    /// Queues a text message (the durable outbox): it shows in ``outgoing`` at once, then in ``messages``.
    @discardableResult
    public func send(_ text: String) throws -> OutgoingMessage {
        let entry = try client.queueMessage(parts: [.text(text)], to: .conversation(conversationId))
        take(entry)
        return entry
    }

    private static func isSend(_ entry: OutgoingMessage, to conversationId: String) -> Bool {
        guard case .send = entry.action else { return false }
        return entry.receiver == .conversation(conversationId)
    }

    private func take(_ entry: OutgoingMessage) {
        switch entry.state {
        case .pending, .failed:
            if let index = outgoing.firstIndex(where: { $0.id == entry.id }) {
                outgoing[index] = entry
            } else {
                outgoing.append(entry)
            }
        case .sent, .reacted, .cancelled:
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
