import Foundation
import ParleyProtocol

/// Blocks, reports, mutes and bans: the rules both stores apply.
///
/// A block is one-way in what it hides (the blocker no longer receives the blocked user's presence, profile changes
/// and typing) and two-way in what it stops: while either of a direct conversation's two participants blocks the
/// other, neither can start it, send in it, edit in it or react in it (`ERR_BLOCKED`). Groups are not affected: the
/// blocker's client hides the blocked user's messages there (docs/SDK.md).
public enum Safety {
    /// Most users one user may block.
    public static let maxBlocks = 1_000
    /// Most bytes of a report's `details` and of a resolution.
    public static let maxReportTextBytes = 1_024

    /// The refusal of a send, edit, reaction or new direct conversation between `actor` and `other`, given who blocked
    /// whom: it tells the blocker what to do, and the blocked user no more than that they cannot.
    public static func refusal(actor: String, actorBlockedOther: Bool) -> DomainError {
        actorBlockedOther
            ? DomainError(.blocked, "You blocked this user: unblock them to write to them.")
            : DomainError(.blocked, "You cannot write to this user.")
    }

    /// Throws the refusal when `blockers` (the blockers found between `actor` and `other`) is not empty.
    public static func requireNoBlock(actor: String, blockers: [String]) throws {
        guard !blockers.isEmpty else { return }
        throw refusal(actor: actor, actorBlockedOther: blockers.contains(actor))
    }

    // MARK: Mutes

    /// The refusal of a muted participant's send, edit, reaction or typing.
    public static func mutedRefusal(until: Int64?) -> DomainError {
        let end = until.map { Date(timeIntervalSince1970: Double($0) / 1000).formatted(.iso8601) }
        return DomainError(.muted, "You are muted in this conversation\(end.map { " until \($0)" } ?? "").")
    }

    /// `role` (nil: the app's server) mutes or unmutes `target`: who may remove a participant may mute them; the app's
    /// server anyone. Groups only.
    public static func requireMute(
        _ role: ParticipantRole?, target: Participant, type: ConversationType, roles: ConversationRoles
    )
        throws
    {
        guard type == .group else { throw DomainError(.forbidden, "Nobody is muted in a direct conversation.") }
        guard let role else { return }
        do {
            try ConversationRules.requireRemove(role, target.role, roles: roles)
        } catch {
            throw DomainError(.forbidden, "A \(role.rawValue) cannot mute a \(target.role.rawValue) here.")
        }
    }

    /// The participant after `mute`; nil when it changes nothing (the same mute again, or unmuting one not muted).
    public static func muted(_ participant: Participant, by mute: Command.MuteParticipant) -> Participant? {
        var changed = participant
        changed.muted = mute.muted ? true : nil
        changed.mutedUntil = mute.muted ? mute.until : nil
        return changed == participant ? nil : changed
    }

    // MARK: Bans

    /// The refusal of a banned user's join, reading, or addition by someone else (`addedBy` true).
    public static func bannedRefusal(_ ban: ConversationBan, addedBy: Bool = false) -> DomainError {
        let end = ban.until.map { " until \(Date(timeIntervalSince1970: Double($0) / 1000).formatted(.iso8601))" } ?? ""
        return addedBy
            ? DomainError(.banned, "\(ban.uid) is banned from this conversation\(end).")
            : DomainError(.banned, "You are banned from this conversation\(end).")
    }

    /// `actor` with `role` (both nil: the app's server) bans or unbans `uid`, a participant with the role `target` or
    /// (nil) not a participant. Who may remove a participant may ban them, and who may remove a member may ban
    /// someone not in the group; the app's server anyone. Nobody bans themself or the owner. Groups only.
    public static func requireBan(
        actor: String?, role: ParticipantRole?, uid: String, target: ParticipantRole?, type: ConversationType,
        roles: ConversationRoles
    ) throws {
        guard type == .group else { throw DomainError(.forbidden, "Nobody is banned from a direct conversation.") }
        guard uid != actor else { throw DomainError(.badRequest, "You cannot ban or unban yourself.") }
        guard target != .owner else { throw DomainError(.forbidden, "The owner cannot be banned.") }
        guard let role else { return }
        let targetRole = target ?? .member
        do {
            try ConversationRules.requireRemove(role, targetRole, roles: roles)
        } catch {
            throw DomainError(.forbidden, "A \(role.rawValue) cannot ban a \(targetRole.rawValue) here.")
        }
    }

    /// The ban `command` (a ban, not an unban) makes over the one in force (`current`): `current` itself, unchanged,
    /// when it gives the same end and reason again; otherwise a ban that keeps the `createdAt` of `current`.
    public static func banned(by command: Command.BanParticipant, current: ConversationBan?)
        -> (ban: ConversationBan, changed: Bool)
    {
        if let current, current.until == command.until, current.reason == command.reason { return (current, false) }
        let ban = ConversationBan(
            conversationId: command.conversationId, uid: command.uid, bannedBy: command.actor, reason: command.reason,
            until: command.until, createdAt: current?.createdAt ?? command.now
        )
        return (ban, true)
    }

    /// The refusal of an unban when the user is not banned.
    public static func notBanned(_ uid: String) -> DomainError {
        DomainError(.banNotFound, "\(uid) is not banned from this conversation.")
    }
}
