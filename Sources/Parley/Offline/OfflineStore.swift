import Foundation
import Logging
import NIOConcurrencyHelpers

/// A conversation as an inbox shows it: the conversation, its newest message and the user's unread count.
public struct ConversationSummary: Codable, Sendable, Hashable, Identifiable {
    /// The conversation.
    public var conversation: Conversation
    /// The newest message (nil in a conversation without any yet).
    public var lastMessage: Message?
    /// Messages from others the user has not read.
    public var unread: Int
    /// Unread messages that mention the user.
    public var unreadMentions: Int
    /// The other participant of a direct conversation (nil for a group, and when not known).
    public var otherMember: User?
    /// The conversation's id.
    public var id: String { conversation.id }
    /// When the conversation was last active: its last message, else its last change.
    public var activityAt: Int64 { max(lastMessage?.sentAt ?? 0, conversation.updatedAt) }

    /// Creates a summary.
    public init(
        conversation: Conversation, lastMessage: Message?, unread: Int, unreadMentions: Int = 0,
        otherMember: User? = nil
    ) {
        self.conversation = conversation
        self.lastMessage = lastMessage
        self.unread = unread
        self.unreadMentions = unreadMentions
        self.otherMember = otherMember
    }

    /// The summary of an inbox entry (`GET /v1/me/inbox`).
    public init(_ entry: InboxEntry) {
        self.init(
            conversation: entry.conversation, lastMessage: entry.lastMessage, unread: entry.unread,
            unreadMentions: entry.unreadMentions, otherMember: entry.otherMember
        )
    }

    enum CodingKeys: String, CodingKey {
        case conversation, lastMessage, unread, unreadMentions, otherMember
    }

    /// Decodes a summary; one the device kept before mention counts existed has none.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        conversation = try container.decode(Conversation.self, forKey: .conversation)
        lastMessage = try container.decodeIfPresent(Message.self, forKey: .lastMessage)
        unread = try container.decode(Int.self, forKey: .unread)
        unreadMentions = try container.decodeIfPresent(Int.self, forKey: .unreadMentions) ?? 0
        otherMember = try container.decodeIfPresent(User.self, forKey: .otherMember)
    }

    /// Most recently active first (ties by id, so the order is stable).
    static func byActivity(_ summaries: some Sequence<ConversationSummary>) -> [ConversationSummary] {
        summaries.sorted { ($0.activityAt, $0.id) > ($1.activityAt, $1.id) }
    }
}

/// The logged-in user's conversations and their most recent messages, kept on the device so that an app opened
/// without a network shows them at once (``ParleyClient/storedConversations()``,
/// ``ParleyClient/storedMessages(conversationId:)``, and the SwiftUI models).
///
/// What goes in:
/// - the conversation list and pages of messages the app reads from the server (the inbox model, message lists);
/// - every event the client delivers, in order: resume and gap backfills included, so the store follows the server
///   exactly as the app's listeners do. A conversation the server says must be resynchronised
///   (`parley.resyncRequired`) loses its stored messages until a page is read again: stale messages are never shown.
///
/// On disk, in `offline-<appId>/` of the storage directory: `inbox.json` (whose user the folder holds, the summaries
/// and unread counts), and for each conversation a snapshot of its newest messages (`c-<id>.json`, at most
/// ``AppSettings/offlineMessageLimit``, evicted oldest first) plus a journal of the events applied since
/// (`c-<id>.<generation>.events`, one JSON line each, folded into the next generation's snapshot once it holds as many
/// events as the limit). Opening a conversation reads one snapshot and replays its journal; an event costs one appended
/// line, not a rewrite. The folder belongs to one user: `logout()`, and a login as someone else, remove it.
package final class OfflineStore: Sendable {
    private struct Inbox: Codable {
        var uid: String
        var conversations: [String: ConversationSummary]
    }

    /// A conversation's snapshot: its timeline, and the generation of the journal that continues it.
    private struct Snapshot: Codable {
        var timeline: MessageTimeline
        var generation: Int
    }

    private struct Loaded {
        var timeline: MessageTimeline
        var generation: Int
        var journaled: Int
    }

    private struct State {
        var uid: String?
        var inbox: [String: ConversationSummary] = [:]
        /// Conversations read since login, most recently used last (at most ``cached``).
        var loaded: [String: Loaded] = [:]
        var recency: [String] = []
    }

    /// How many conversations' messages stay in memory between reads.
    private static let cached = 16

    let limit: Int
    let directory: URL
    private let state = NIOLockedValueBox(State())
    private let logger: Logger

    /// A store keeping `limit` messages per conversation; 0 keeps nothing (and writes nothing).
    package init(directory: URL, appId: String, limit: Int, logger: Logger) {
        self.directory = directory.appendingPathComponent("offline-\(SessionStore.safeName(appId))", isDirectory: true)
        self.limit = max(0, limit)
        self.logger = logger
    }

    var isEnabled: Bool { limit > 0 }

    private var inboxURL: URL { directory.appendingPathComponent("inbox.json") }

    private func snapshotURL(_ conversationId: String) -> URL {
        directory.appendingPathComponent("c-\(SessionStore.safeName(conversationId)).json")
    }

    /// The journal of the events applied after the snapshot of `generation`. A new snapshot starts a new generation
    /// (written before the old journal goes), so a crash between the two never replays an event twice.
    private func journalURL(_ conversationId: String, _ generation: Int) -> URL {
        directory.appendingPathComponent("c-\(SessionStore.safeName(conversationId)).\(generation).events")
    }

    // MARK: The user

    /// Opens `uid`'s store: what an earlier run kept for this user, nothing for anyone else. Files that no inbox
    /// vouches for as `uid`'s (another user's, or an unreadable inbox's) go, and the inbox is written at once, so that
    /// every file in the folder is known to be `uid`'s from now on.
    package func begin(uid: String) {
        guard isEnabled else { return }
        let saved = try? JSONDecoder().decode(Inbox.self, from: Data(contentsOf: inboxURL))
        let mine = saved?.uid == uid ? saved : nil
        if mine == nil { wipe() }
        state.withLockedValue { state in
            state = State(uid: uid, inbox: mine?.conversations ?? [:])
            saveInbox(state)
        }
    }

    /// Forgets the user: memory and files (logout).
    package func end() {
        state.withLockedValue { $0 = State() }
        wipe()
    }

    private func wipe() {
        guard FileManager.default.fileExists(atPath: directory.path) else { return }
        do {
            try FileManager.default.removeItem(at: directory)
        } catch {
            logger.error("The offline store could not be removed: \(error)")
        }
    }

    // MARK: Reading

    /// The stored conversations, most recently active first.
    package var conversations: [ConversationSummary] {
        ConversationSummary.byActivity(state.withLockedValue { $0.inbox.values })
    }

    /// The stored messages of a conversation, ascending.
    package func messages(conversationId: String) -> [Message] {
        guard isEnabled else { return [] }
        return state.withLockedValue { state in
            guard state.uid != nil else { return [] }
            return load(conversationId, in: &state).timeline.messages
        }
    }

    /// The conversation from memory, else from its snapshot and journal (called with the lock held).
    private func load(_ conversationId: String, in state: inout State) -> Loaded {
        if let loaded = state.loaded[conversationId] {
            state.recency.removeAll { $0 == conversationId }
            state.recency.append(conversationId)
            return loaded
        }
        var loaded = Loaded(
            timeline: MessageTimeline(viewer: state.uid ?? "", thread: nil), generation: 0, journaled: 0
        )
        if let data = try? Data(contentsOf: snapshotURL(conversationId)),
            let snapshot = try? JSONDecoder().decode(Snapshot.self, from: data)
        {
            loaded.timeline = snapshot.timeline
            loaded.generation = snapshot.generation
        }
        if let journal = try? Data(contentsOf: journalURL(conversationId, loaded.generation)) {
            let decoder = JSONDecoder()
            // The same rules as when the events came (MessageTimeline), so the replay ends where the live run did. A
            // line cut short by a crash (the last one) does not decode and is skipped.
            for line in journal.split(separator: UInt8(ascii: "\n")) {
                guard let event = try? decoder.decode(Event.self, from: line) else { continue }
                loaded.timeline.apply(event)
                loaded.timeline.keepNewest(limit)
                loaded.journaled += 1
            }
        }
        state.loaded[conversationId] = loaded
        state.recency.append(conversationId)
        if state.recency.count > Self.cached {
            state.loaded.removeValue(forKey: state.recency.removeFirst())
        }
        return loaded
    }

    // MARK: Writing

    /// Takes a delivered event: messages, reactions, conversations, membership, unread counts.
    package func record(_ event: Event) {
        guard isEnabled else { return }
        state.withLockedValue { state in
            guard let uid = state.uid else { return }
            var inboxChanged = false
            switch event.payload {
            case .messageSent(let message), .messageUpdated(let message), .messageDeleted(let message):
                append(event, to: message.conversationId, in: &state)
                if var summary = state.inbox[message.conversationId],
                    (summary.lastMessage?.seq ?? 0) <= message.seq
                {
                    summary.lastMessage = message.stored
                    state.inbox[message.conversationId] = summary
                    inboxChanged = true
                }
            case .reactionAdded, .reactionRemoved, .messagePinned, .messageUnpinned:
                if let conversationId = event.conversationId { append(event, to: conversationId, in: &state) }
            case .conversationCreated(let conversation), .conversationUpdated(let conversation),
                .conversationUndeleted(let conversation):
                var summary =
                    state.inbox[conversation.id]
                    ?? ConversationSummary(conversation: conversation, lastMessage: nil, unread: 0)
                summary.conversation = conversation
                state.inbox[conversation.id] = summary
                inboxChanged = true
            case .conversationDeleted(let conversation):
                forget(conversation.id, in: &state)
                inboxChanged = true
            case .participantRemoved(let participant) where participant.uid == uid:
                if let conversationId = event.conversationId {
                    forget(conversationId, in: &state)
                    inboxChanged = true
                }
            case .unreadUpdated(let unread):
                for change in unread.conversations {
                    if var summary = state.inbox[change.conversationId], summary.unread != change.unread {
                        summary.unread = change.unread
                        state.inbox[change.conversationId] = summary
                        inboxChanged = true
                    }
                }
            case .resyncRequired:
                // Events were lost: the stored messages may be out of date. Dropped until a page is read again.
                if let conversationId = event.conversationId { removeMessages(of: conversationId, in: &state) }
            default:
                break
            }
            if inboxChanged { saveInbox(state) }
        }
    }

    /// Takes the conversation list the server gave (it replaces the stored one), with unread counts.
    func replaceConversations(_ summaries: [ConversationSummary]) {
        guard isEnabled else { return }
        state.withLockedValue { state in
            guard state.uid != nil else { return }
            let kept = Set(summaries.map(\.id))
            for id in state.inbox.keys where !kept.contains(id) { removeMessages(of: id, in: &state) }
            state.inbox = Dictionary(summaries.map { ($0.id, $0) }, uniquingKeysWith: { $1 })
            saveInbox(state)
        }
    }

    /// Takes one conversation's row, read from the server.
    func add(_ summary: ConversationSummary) {
        guard isEnabled else { return }
        state.withLockedValue { state in
            guard state.uid != nil else { return }
            state.inbox[summary.id] = summary
            saveInbox(state)
        }
    }

    /// Takes a page of a conversation's messages read from the server (a message list's).
    package func merge(_ page: MessagePage, of conversationId: String) {
        guard isEnabled else { return }
        state.withLockedValue { state in
            guard state.uid != nil else { return }
            var loaded = load(conversationId, in: &state)
            loaded.timeline.merge(page)
            loaded.timeline.keepNewest(limit)
            writeSnapshot(conversationId, &loaded)
            state.loaded[conversationId] = loaded
        }
    }

    private func append(_ event: Event, to conversationId: String, in state: inout State) {
        var loaded = load(conversationId, in: &state)
        guard loaded.timeline.apply(event) else { return }
        loaded.timeline.keepNewest(limit)
        loaded.journaled += 1
        if loaded.journaled >= limit {
            writeSnapshot(conversationId, &loaded)
        } else {
            appendLine(event, to: journalURL(conversationId, loaded.generation))
        }
        state.loaded[conversationId] = loaded
    }

    private func forget(_ conversationId: String, in state: inout State) {
        state.inbox.removeValue(forKey: conversationId)
        removeMessages(of: conversationId, in: &state)
    }

    private func removeMessages(of conversationId: String, in state: inout State) {
        // The journal's name needs the generation: the conversation is read for it when it is not in memory.
        let generation = load(conversationId, in: &state).generation
        state.loaded.removeValue(forKey: conversationId)
        state.recency.removeAll { $0 == conversationId }
        try? FileManager.default.removeItem(at: snapshotURL(conversationId))
        try? FileManager.default.removeItem(at: journalURL(conversationId, generation))
    }

    // MARK: Files

    private func prepareDirectory() throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    private func saveInbox(_ state: State) {
        guard let uid = state.uid else { return }
        write(Inbox(uid: uid, conversations: state.inbox), to: inboxURL)
    }

    /// Writes the snapshot of the next generation, then removes the journal it includes.
    private func writeSnapshot(_ conversationId: String, _ loaded: inout Loaded) {
        let folded = journalURL(conversationId, loaded.generation)
        loaded.generation += 1
        loaded.journaled = 0
        write(Snapshot(timeline: loaded.timeline, generation: loaded.generation), to: snapshotURL(conversationId))
        try? FileManager.default.removeItem(at: folded)
    }

    private func write(_ value: some Encodable, to url: URL) {
        do {
            try prepareDirectory()
            try JSONEncoder().encode(value).write(to: url, options: .atomic)
        } catch {
            logger.error("The offline store could not write \(url.lastPathComponent): \(error)")
        }
    }

    private func appendLine(_ event: Event, to url: URL) {
        do {
            try prepareDirectory()
            var line = try JSONEncoder().encode(event)
            line.append(UInt8(ascii: "\n"))
            if !FileManager.default.fileExists(atPath: url.path) {
                _ = FileManager.default.createFile(atPath: url.path, contents: nil)
            }
            let handle = try FileHandle(forWritingTo: url)
            defer { try? handle.close() }
            try handle.seekToEnd()
            try handle.write(contentsOf: line)
        } catch {
            logger.error("The offline store could not append to \(url.lastPathComponent): \(error)")
        }
    }
}
