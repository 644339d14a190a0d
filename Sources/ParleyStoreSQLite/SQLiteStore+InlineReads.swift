import GRDB
import ParleyProtocol
import ParleyStore

/// The handshake reads of a WebSocket, on the caller's thread: a read-only connection of ``InlineReaders`` runs them
/// on the calling thread (a WAL reader, never blocked by the writer), so the server opens a connection without
/// leaving its event loop.
extension SQLiteStore: InlineReads {
    public func connectionOpening(tokenHash: [UInt8]) throws -> ConnectionOpening? {
        try inlineReaders.read { db in
            guard let token = try Self.fetchToken(db, hash: tokenHash) else { return nil }
            // The user and their stream's end in one lookup (a user that no longer exists has none: 0).
            let user = try Self.fetchUserAndStream(db, appId: token.appId, uid: token.uid)
            let conversations = try Self.fetchConversationPositions(db, appId: token.appId, uid: token.uid)
            return ConnectionOpening(
                token: token, user: user?.user,
                positions: StreamPositions(userSeq: user?.lastUserSeq ?? 0, conversations: conversations)
            )
        }
    }

    public func catchUpState(appId: String, uid: String, afterUserSeq: Int64, limit: Int) throws -> CatchUpState {
        try inlineReaders.read { db in
            CatchUpState(
                positions: try Self.fetchStreamPositions(db, appId: appId, uid: uid),
                changes: try Self.fetchMembershipChanges(
                    db, appId: appId, uid: uid, afterUserSeq: afterUserSeq, limit: limit
                )
            )
        }
    }

    public func contacts(of users: [(appId: String, uid: String)]) throws -> [[String]] {
        try inlineReaders.read { db in try users.map { try Self.fetchContacts(db, appId: $0.appId, uid: $0.uid) } }
    }

    /// ``ParleyStore/contacts(of:)``: the inline read above, on the caller's thread.
    public func contacts(of users: [UserRef]) async throws -> [[String]] {
        try contacts(of: users.map { ($0.appId, $0.uid) })
    }

    public func unread(_ requests: [UnreadRequest]) throws -> [UnreadSummary] {
        try inlineReaders.read { db in
            try requests.map { try Self.fetchUnread(db, $0) }
        }
    }
}
