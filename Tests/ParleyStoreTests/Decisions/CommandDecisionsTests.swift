import ParleyProtocol
import ParleyStore
import Testing

/// The decisions alone, without a database: what each store reads goes in, a plan or a refusal comes out. The
/// conformance suites run the same decisions through both stores.
struct CommandDecisionsTests {
    static let row = ConversationRow(
        pk: 7, appId: "app",
        conversation: Conversation(
            id: "c", type: .group, createdBy: "alice", createdAt: 1, updatedAt: 1, lastSeq: 10, participantCount: 2),
        lastActivityAt: 1, deletedAt: nil
    )

    static func snapshot(actor: Participant?, row: ConversationRow = row) -> ConversationSnapshot {
        ConversationSnapshot(row: row, members: ["alice", "bob"], actor: actor)
    }

    static func bob(delivered: Int64, read: Int64) -> Participant {
        Participant(uid: "bob", role: .member, joinedAt: 1, deliveredSeq: delivered, readSeq: read)
    }

    static func mark(delivered: Int64?, read: Int64?) -> Command.MarkReceipt {
        .init(appId: "app", conversationId: "c", uid: "bob", deliveredSeq: delivered, readSeq: read, now: 5)
    }

    @Test func aReceiptNamesEachPositionThatMovesOnce() throws {
        // Read catches up with delivered: only the read position moves, and its message is the one to name.
        let readOnly = try CommandDecisions.receiptMove(
            Self.mark(delivered: nil, read: 8), Self.snapshot(actor: Self.bob(delivered: 8, read: 3)))
        #expect(readOnly.named == [8])
        // Both move to one position: named once.
        let both = try CommandDecisions.receiptMove(
            Self.mark(delivered: nil, read: 9), Self.snapshot(actor: Self.bob(delivered: 8, read: 3)))
        #expect(both.named == [9])
        // Past the last event: held at it. Backwards: nothing moves.
        let past = try CommandDecisions.receiptMove(
            Self.mark(delivered: 50, read: 2), Self.snapshot(actor: Self.bob(delivered: 8, read: 3)))
        #expect((past.delivered, past.read, past.named) == (10, 3, [10]))
        let plan = try CommandDecisions.markReceipt(
            Self.mark(delivered: 50, read: 2), past, newest: [10: MessagePlace(messageId: "m9", sentAt: 4)])
        guard case .messageDelivered(let receipt) = plan.result.events.first?.event.payload else {
            Issue.record("no delivered receipt")
            return
        }
        #expect(receipt == Receipt(uid: "bob", seq: 10, messageId: "m9", timestamp: 4))
        #expect(plan.result.events.count == 1)
        let nothing = try CommandDecisions.receiptMove(
            Self.mark(delivered: 1, read: 1), Self.snapshot(actor: Self.bob(delivered: 8, read: 3)))
        #expect(nothing.named.isEmpty)
        #expect(try CommandDecisions.markReceipt(Self.mark(delivered: 1, read: 1), nothing, newest: [:]).writes.isEmpty)
    }

    @Test func whoMayNotSeeAConversationIsToldItDoesNotExist() {
        var deleted = Self.row
        deleted.deletedAt = 3
        let update = Command.UpdateConversation(
            appId: "app", conversationId: "c", actor: "bob", update: UpdateConversationRequest(name: "x"), now: 5)
        #expect(throws: DomainError.conversationNotFound("c")) {
            try CommandDecisions.updateConversation(update, nil)
        }
        #expect(throws: DomainError.conversationNotFound("c")) {
            try CommandDecisions.updateConversation(update, Self.snapshot(actor: nil))
        }
        #expect(throws: DomainError.conversationNotFound("c")) {
            try CommandDecisions.updateConversation(
                update, Self.snapshot(actor: Self.bob(delivered: 0, read: 0), row: deleted))
        }
        var open = Self.row
        open.conversation.isPublic = true
        let refusal = #expect(throws: DomainError.self) {
            try CommandDecisions.updateConversation(update, Self.snapshot(actor: nil, row: open))
        }
        #expect(refusal?.code == .notAParticipant)
    }

    @Test func aChangeIsOneWriteOfTheRowAndOneNumberedEvent() throws {
        var owner = Self.bob(delivered: 0, read: 0)
        owner.role = .owner
        let plan = try CommandDecisions.setDeleted(
            true, .init(appId: "app", conversationId: "c", actor: "bob", now: 20), Self.snapshot(actor: owner))
        guard plan.writes.count == 2, case .updateConversation(7, let conversation) = plan.writes[0],
            case .appendEvents(let append) = plan.writes[1]
        else {
            Issue.record("unexpected writes \(plan.writes)")
            return
        }
        #expect(conversation.deletedAt == 20 && conversation.updatedAt == 20)
        #expect(append.events.map(\.seq) == [11] && append.lastSeq == 11 && append.activityAt == 20)
        #expect(plan.result.events.map(\.event.seq) == [11])
        #expect(plan.result.recipients == ["alice", "bob"])
        // Restoring one that is not deleted changes nothing; deleting one already deleted is refused like any action
        // on a deleted conversation.
        let again = try CommandDecisions.setDeleted(
            false, .init(appId: "app", conversationId: "c", actor: "bob", now: 21), Self.snapshot(actor: owner))
        #expect(again.writes.isEmpty && again.result.events.isEmpty)
        var gone = Self.row
        gone.deletedAt = 20
        #expect(throws: DomainError.conversationNotFound("c")) {
            try CommandDecisions.setDeleted(
                true, .init(appId: "app", conversationId: "c", actor: "bob", now: 21),
                Self.snapshot(actor: owner, row: gone))
        }
    }
}
