import ParleyProtocol

/// Deleting a user (docs/PROTOCOL.md, "Deleting a user"): the server takes them out of each conversation
/// (``Command/removeDeletedUser(_:)``), deletes each message they sent (``Command/deleteMessage(_:)``, erasing the
/// sender where the app's ``DeletedUserMessages`` says so), then the store purges what is left
/// (``ParleyStore/purgeUser(appId:uid:now:)``).
public enum UserPurge: Sendable, Equatable {
    /// The user is gone; this is who they were.
    case purged(User)
    /// The app has no such user.
    case notFound
    /// They participate in a conversation again (added while they were being deleted): take them out, then purge.
    case stillParticipates
}

/// The statements of a purge, in order, the same for both stores; each takes its parameters in the order of
/// ``PurgeStatement/parameters``.
public enum PurgeStatement: CaseIterable, Sendable {
    case reactions, pins, archives, mentions, memberships, blocks, reports, bans, tokens, devices, pushJobs, words
    case uploads, user

    /// The SQL, with `?` for each parameter.
    public var sql: String {
        let theirConversations = "(SELECT conversation_pk FROM memberships WHERE app_id = ? AND uid = ?)"
        switch self {
        case .reactions: return "DELETE FROM reactions WHERE uid = ? AND conversation_pk IN \(theirConversations)"
        case .pins:
            // Pins they made stay, no longer naming them (as the app's).
            return "UPDATE pins SET pinned_by = NULL WHERE pinned_by = ? AND conversation_pk IN \(theirConversations)"
        case .archives:
            return "DELETE FROM conversation_archives WHERE uid = ? AND conversation_pk IN \(theirConversations)"
        case .mentions: return "DELETE FROM mentions WHERE app_id = ? AND uid = ?"
        case .memberships: return "DELETE FROM memberships WHERE app_id = ? AND uid = ?"
        case .blocks: return "DELETE FROM blocks WHERE app_id = ? AND (blocker = ? OR blocked = ?)"
        case .reports: return "DELETE FROM reports WHERE app_id = ? AND (reporter = ? OR uid = ?)"
        case .bans:
            return
                "DELETE FROM bans WHERE uid = ? AND conversation_pk IN (SELECT pk FROM conversations WHERE app_id = ?)"
        case .tokens: return "DELETE FROM auth_tokens WHERE app_id = ? AND uid = ?"
        case .devices: return "DELETE FROM devices WHERE app_id = ? AND uid = ?"
        case .pushJobs: return "DELETE FROM push_jobs WHERE app_id = ? AND uid = ?"
        case .words: return "DELETE FROM user_words WHERE app_id = ? AND uid = ?"
        case .uploads:
            return """
                UPDATE attachments SET removed_at = ? WHERE app_id = ? AND uploader = ? AND message_id IS NULL
                AND removed_at IS NULL
                """
        case .user: return "DELETE FROM users WHERE app_id = ? AND uid = ?"
        }
    }

    /// What to bind, in order.
    public enum Parameter: Sendable { case appId, uid, now }

    public var parameters: [Parameter] {
        switch self {
        case .reactions, .pins, .archives: return [.uid, .appId, .uid]
        case .mentions, .memberships, .tokens, .devices, .pushJobs, .words, .user: return [.appId, .uid]
        case .blocks, .reports: return [.appId, .uid, .uid]
        case .bans: return [.uid, .appId]
        case .uploads: return [.now, .appId, .uid]
        }
    }
}
