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
            return ConnectionOpening(
                token: token, user: try Self.fetchUser(db, appId: token.appId, uid: token.uid),
                positions: try Self.fetchStreamPositions(db, appId: token.appId, uid: token.uid)
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

    public func contacts(appId: String, uid: String) throws -> [String] {
        try inlineReaders.read { db in try Self.fetchContacts(db, appId: appId, uid: uid) }
    }

    public func unread(appId: String, users: [(uid: String, conversationIds: [String]?)]) throws -> [UnreadSummary] {
        try inlineReaders.read { db in
            try users.map { try Self.fetchUnread(db, appId: appId, uid: $0.uid, conversationIds: $0.conversationIds) }
        }
    }
}
