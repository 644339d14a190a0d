import ParleyStore

/// The conversations this node follows on NATS: those that a user connected here participates in.
///
/// Built from each connection's handshake (the conversations and positions it read) and kept up to date by the
/// membership events this node publishes (a connected user joins or leaves). A conversation whose last connected
/// participant left is followed for `linger` more, so that a client reconnecting moments later (a flaky network, a
/// restart of another node) does not make the node unsubscribe and subscribe again.
///
/// Pure: time comes in as an argument; what to do comes back as ``Action``s that ``NATSCluster`` carries out.
struct ConversationInterest {
    enum Action: Hashable, Sendable {
        /// Follow the conversation; this node's connections have what was published up to `position` (their
        /// handshake read it, or it is the event that made a connected user a participant).
        case follow(ConversationRef, position: Int64)
        /// Stop following it.
        case unfollow(ConversationRef)
    }

    private struct User {
        var connections = 0
        var conversations: Set<String> = []
    }

    let linger: Duration
    private var users: [UserKey: User] = [:]
    /// Connected participants per followed conversation (0 while it lingers).
    private var members: [ConversationRef: Int] = [:]
    /// Followed conversations without a connected participant, and when they stop being followed.
    private var lingering: [ConversationRef: Duration] = [:]

    init(linger: Duration) {
        self.linger = linger
    }

    /// The conversations followed now.
    var followed: [ConversationRef] { Array(members.keys) }
    var followedCount: Int { members.count }

    /// Whether a user has a connection here.
    func isConnected(_ user: UserKey) -> Bool { users[user] != nil }

    /// A connection of `user` opened; `conversations` are the positions its handshake read.
    mutating func connectionOpened(_ user: UserKey, conversations: [String: Int64]) -> [Action] {
        users[user, default: User()].connections += 1
        var actions: [Action] = []
        for (id, position) in conversations {
            actions += join(user, id, position: position)
        }
        return actions
    }

    /// A connection of `user` closed; their conversations linger once it was their last.
    mutating func connectionClosed(_ user: UserKey, now: Duration) {
        guard var record = users[user] else { return }
        record.connections -= 1
        guard record.connections <= 0 else {
            users[user] = record
            return
        }
        users[user] = nil
        for id in record.conversations { release(ConversationRef(appId: user.appId, conversationId: id), now: now) }
    }

    /// `user` became a participant of a conversation at event `seq` (ignored unless they are connected here).
    mutating func joined(_ user: UserKey, conversationId: String, seq: Int64) -> [Action] {
        guard users[user] != nil else { return [] }
        return join(user, conversationId, position: seq)
    }

    /// `user` stopped being a participant of a conversation (ignored unless they are connected here).
    mutating func left(_ user: UserKey, conversationId: String, now: Duration) {
        guard users[user]?.conversations.remove(conversationId) != nil else { return }
        release(ConversationRef(appId: user.appId, conversationId: conversationId), now: now)
    }

    /// Stops following the conversations that lingered long enough.
    mutating func tick(now: Duration) -> [Action] {
        var actions: [Action] = []
        for (conversation, until) in lingering where now >= until {
            lingering[conversation] = nil
            members[conversation] = nil
            actions.append(.unfollow(conversation))
        }
        return actions
    }

    private mutating func join(_ user: UserKey, _ id: String, position: Int64) -> [Action] {
        guard users[user]!.conversations.insert(id).inserted else { return [] }
        let conversation = ConversationRef(appId: user.appId, conversationId: id)
        lingering[conversation] = nil
        let count = members[conversation]
        members[conversation] = (count ?? 0) + 1
        return count == nil ? [.follow(conversation, position: position)] : []
    }

    private mutating func release(_ conversation: ConversationRef, now: Duration) {
        guard let count = members[conversation] else { return }
        members[conversation] = count - 1
        if count - 1 <= 0 { lingering[conversation] = now + linger }
    }
}
