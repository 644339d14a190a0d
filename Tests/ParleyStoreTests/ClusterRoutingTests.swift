import Foundation
import ParleyProtocol
import ParleyStore
import Testing

@testable import ParleyStorePostgres

/// Another node reads events from the tables and must give each the recipients it had when it was committed:
/// ``PostgresStore/route(_:members:changes:)`` undoes the joins and departures made after each event.
struct ClusterRoutingTests {
    static func event(_ seq: Int64) -> StoredEvent {
        let event = Event(
            id: "c:\(seq)", appId: "a", name: .messageSent, conversationId: "c", seq: seq, timestamp: 0,
            context: EventContext(createdBy: "alice"),
            payload: .messageSent(
                Message(id: "m\(seq)", conversationId: "c", seq: seq, sender: "alice", parts: [.text("x")], sentAt: 0))
        )
        return StoredEvent(event: event, json: [])
    }

    @Test func aUserAddedLaterDoesNotReceiveEarlierEvents() {
        // Now: alice, bob, carol. carol joined at 12; nothing else changed since 10.
        let routed = PostgresStore.route(
            (10...13).map(Self.event), members: ["alice", "bob", "carol"], changes: [("carol", true, 12)]
        )
        #expect(
            routed.map(\.recipients) == [
                ["alice", "bob"], ["alice", "bob"], ["alice", "bob", "carol"], ["alice", "bob", "carol"],
            ])
    }

    @Test func aRemovedUserReceivesEventsUpToTheirRemovalIncluded() {
        // Now: alice. bob was removed at 11.
        let routed = PostgresStore.route(
            (10...12).map(Self.event), members: ["alice"], changes: [("bob", false, 11)]
        )
        #expect(routed.map(\.recipients) == [["alice", "bob"], ["alice", "bob"], ["alice"]])
    }

    @Test func leavingAndRejoiningIsUndoneInOrder() {
        // Now: alice, bob. bob left at 11 and came back at 13.
        let routed = PostgresStore.route(
            (10...14).map(Self.event), members: ["alice", "bob"], changes: [("bob", false, 11), ("bob", true, 13)]
        )
        #expect(
            routed.map(\.recipients) == [
                ["alice", "bob"], ["alice", "bob"], ["alice"], ["alice", "bob"], ["alice", "bob"],
            ])
    }

    @Test func aBanOrAnUnbanReachesTheUserItNamesOutsideTheGroup() {
        // Now: alice. bob was removed at 11 and banned at 12; dave, never in, was banned at 13 and unbanned at 14.
        func ban(_ seq: Int64, _ uid: String, lifted: Bool = false) -> StoredEvent {
            let ban = ConversationBan(conversationId: "c", uid: uid, bannedBy: "alice", createdAt: 0)
            let event = Event(
                id: "c:\(seq)", appId: "a", name: lifted ? .participantUnbanned : .participantBanned,
                conversationId: "c", seq: seq, timestamp: 0, context: EventContext(createdBy: "alice"),
                payload: lifted ? .participantUnbanned(ban) : .participantBanned(ban)
            )
            return StoredEvent(event: event, json: [])
        }
        let routed = PostgresStore.route(
            [Self.event(11), ban(12, "bob"), ban(13, "dave"), ban(14, "dave", lifted: true), Self.event(15)],
            members: ["alice"], changes: [("bob", false, 11)]
        )
        #expect(
            routed.map(\.recipients) == [
                ["alice", "bob"], ["alice", "bob"], ["alice", "dave"], ["alice", "dave"], ["alice"],
            ])
    }
}
