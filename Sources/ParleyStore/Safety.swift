import Foundation
import ParleyProtocol

/// Blocks and reports: the rules both stores apply.
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
}
