import Foundation

/// How far the client has received each of the user's streams: per conversation the last sequence number, and
/// the position in the user's own stream (their joins and departures). Sent as `resume` on every connect.
struct StreamCursors: Codable, Sendable, Hashable {
    var uid: String
    var userSeq: Int64 = 0
    var conversations: [String: Int64] = [:]
    /// False until the first `caughtUp`: a client that never connected asks for no replay.
    var established = false

    init(uid: String) { self.uid = uid }

    var resumeRequest: ResumeRequest? {
        established ? ResumeRequest(userSeq: userSeq, conversations: conversations) : nil
    }

    /// What to do with a durable event (one with a conversation and a sequence number).
    enum Decision: Equatable, Sendable {
        /// The next one: deliver it.
        case deliver
        /// Already delivered: drop it.
        case duplicate
        /// Events `after < seq <= through` are missing before it: fetch them first.
        case gap(after: Int64, through: Int64)
    }

    func decide(conversationId: String, seq: Int64) -> Decision {
        guard let position = conversations[conversationId] else { return .deliver }
        if seq <= position { return .duplicate }
        if seq == position + 1 { return .deliver }
        return .gap(after: position, through: seq - 1)
    }

    /// Records a delivered durable event. The user's own removal ends their stream of that conversation; a ban or an
    /// unban of the user reaches them outside the group, and starts no stream.
    mutating func delivered(_ event: Event) {
        guard let conversationId = event.conversationId, let seq = event.seq else { return }
        switch event.payload {
        case .participantRemoved(let participant) where participant.uid == uid:
            conversations[conversationId] = nil
        case .participantBanned(let ban) where ban.uid == uid, .participantUnbanned(let ban) where ban.uid == uid:
            conversations[conversationId] = nil
        default:
            conversations[conversationId] = max(conversations[conversationId] ?? 0, seq)
        }
    }

    /// The replay is over: the user's conversations are exactly those the server lists.
    mutating func caughtUp(_ frame: CaughtUpFrame) {
        var positions: [String: Int64] = [:]
        for (conversationId, seq) in frame.conversations {
            positions[conversationId] = max(seq, conversations[conversationId] ?? 0)
        }
        conversations = positions
        userSeq = max(userSeq, frame.userSeq)
        established = true
    }

    /// The client skips to `lastSeq` (what it missed is reloaded by the app).
    mutating func resync(_ frame: ResyncFrame) {
        conversations[frame.conversationId] = frame.lastSeq
    }
}

/// The saved ``StreamCursors``: a JSON file next to the saved session.
struct CursorStore: Sendable {
    let fileURL: URL

    init(directory: URL, appId: String) {
        fileURL = directory.appendingPathComponent("cursors-\(SessionStore.safeName(appId)).json")
    }

    /// The saved cursors of `uid`; nil when there are none (or they belong to someone else).
    func load(uid: String) -> StreamCursors? {
        guard let data = try? Data(contentsOf: fileURL),
            let cursors = try? JSONDecoder().decode(StreamCursors.self, from: data), cursors.uid == uid
        else { return nil }
        return cursors
    }

    func save(_ cursors: StreamCursors) throws {
        do {
            try FileManager.default.createDirectory(
                at: fileURL.deletingLastPathComponent(), withIntermediateDirectories: true
            )
            try JSONEncoder().encode(cursors).write(to: fileURL, options: .atomic)
        } catch {
            throw ParleyError(.storageError, "The stream positions could not be saved.", underlying: "\(error)")
        }
    }

    func clear() {
        try? FileManager.default.removeItem(at: fileURL)
    }
}
