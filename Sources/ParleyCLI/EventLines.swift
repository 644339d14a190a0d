import Foundation
import Parley

/// Where an event is shown: `listen` shows every event of the user, naming its conversation; `chat` shows one
/// conversation's, and leaves out what only concerns the user's other devices (their own receipts, presence, unread
/// counts, the end of a replay).
enum EventView {
    case listen
    case chat
}

/// The line that shows `event` to the user `me`, nil when `view` leaves it out. Each line says who did what:
/// `* alice added bob as admin`, `* bob left`, `  ✓✓ read by bob up to #4`, `* caught up (3 missed events)`.
func describe(_ event: Event, me: String, in view: EventView) -> String? {
    let by = event.context.createdBy
    let listening = view == .listen
    // In `listen`, conversation events name their conversation.
    let place = listening ? event.conversationId.map { " in \($0)" } ?? "" : ""
    let byWhom = by.map { " by \($0)" } ?? " by the app"
    switch event.payload {
    case .messageSent(let message):
        return (listening ? "\(message.conversationId) " : "") + describe(message)
    case .messageUpdated(let message): return "* edited\(place): " + describe(message)
    case .messageDeleted(let message): return "*\(place) " + describe(message)
    case .reactionAdded(let reaction):
        return "* \(reaction.uid) reacted \(reaction.key) to #\(reaction.messageSeq)\(place) (\(reaction.count) now)"
    case .reactionRemoved(let reaction):
        return
            "* \(reaction.uid) took back \(reaction.key) from #\(reaction.messageSeq)\(place) (\(reaction.count) now)"
    case .messagePinned(let pin): return "* \(by ?? "the app") pinned #\(pin.messageSeq)\(place)"
    case .messageUnpinned(let pin): return "* \(by ?? "the app") unpinned #\(pin.messageSeq)\(place)"
    case .participantAdded(let participant):
        let role = participant.role.rawValue
        if by == participant.uid { return "* \(participant.uid) joined\(place) as \(role)" }
        return "* \(by ?? "the app") added \(participant.uid)\(place) as \(role)"
    case .participantRemoved(let participant):
        if by == participant.uid { return "* \(participant.uid) left\(place)" }
        return "* \(by ?? "the app") removed \(participant.uid)\(place)"
    case .participantUpdated(let participant):
        let muted = participant.muted == true ? ", muted" : ""
        return "* \(participant.uid) is now \(participant.role.rawValue)\(muted)\(place)\(byWhom)"
    case .participantBanned(let ban):
        let until = ban.until.map { " until \(Date(timeIntervalSince1970: Double($0) / 1000).formatted())" } ?? ""
        return "* \(ban.uid) was banned\(place)\(byWhom)\(until)\(ban.reason.map { ": \($0)" } ?? "")"
    case .participantUnbanned(let ban): return "* \(ban.uid) is no longer banned\(place)\(byWhom)"
    case .participantTyping(let typing):
        return typing.uid == me && !listening ? nil : "* \(typing.uid) is typing…\(place)"
    case .participantTypingOff(let typing):
        return typing.uid == me && !listening ? nil : "* \(typing.uid) stopped typing\(place)"
    case .messageDelivered(let receipt):
        return receipt.uid == me && !listening ? nil : "  ✓ delivered to \(receipt.uid) up to #\(receipt.seq)\(place)"
    case .messageRead(let receipt):
        return receipt.uid == me && !listening ? nil : "  ✓✓ read by \(receipt.uid) up to #\(receipt.seq)\(place)"
    case .presenceUpdated(let presence):
        return presence.uid == me && !listening ? nil : "* \(presence.uid) is \(presence.online ? "online" : "offline")"
    case .conversationCreated(let conversation):
        let what = conversation.type == .direct ? "a direct conversation" : "the group \(title(conversation))"
        return "* \(by ?? "the app") created \(what) (\(conversation.id))"
    case .conversationUpdated(let conversation):
        return "* \(by ?? "the app") updated \(title(conversation))\(place)"
    case .conversationDeleted(let conversation):
        return "* \(by ?? "the app") deleted \(title(conversation))\(place)"
    case .conversationUndeleted(let conversation):
        return "* \(by ?? "the app") restored \(title(conversation))\(place)"
    case .profileUpdated(let profile):
        return profile.uid == me && !listening ? nil : "* \(profile.uid) is now called \(profile.name)"
    case .unreadUpdated(let unread):
        return listening ? "* unread: \(unread.total) in all" : nil
    case .caughtUp(let frame):
        guard listening else { return nil }
        let missed = frame.replayed == 1 ? "1 missed event" : "\(frame.replayed) missed events"
        return "* caught up (\(missed) replayed)"
    case .resyncRequired(let frame):
        let command = listening ? "`parley history`" : "/history"
        return
            "* too much was missed in \(frame.conversationId) [\(frame.reason.rawValue)]: \(command) shows its latest messages"
    case .unknown:
        return "* \(event.name)\(place)\(byWhom)"
    }
}

/// `"Friends"` for a named conversation, else `the conversation`.
private func title(_ conversation: Conversation) -> String {
    conversation.name.map { "\"\($0)\"" } ?? "the conversation"
}
