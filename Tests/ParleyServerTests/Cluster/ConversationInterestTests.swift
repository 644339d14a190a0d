import ParleyStore
import Testing

@testable import ParleyServer

/// The conversations a node follows on NATS (``ConversationInterest``): those of the users connected to it, kept for a
/// while after the last one left.
struct ConversationInterestTests {
    static let alice = UserKey(appId: "app", uid: "alice")
    static let bob = UserKey(appId: "app", uid: "bob")
    static func conversation(_ id: String) -> ConversationRef { ConversationRef(appId: "app", conversationId: id) }

    @Test func aConnectionFollowsItsConversationsFromThePositionsItRead() {
        var interest = ConversationInterest(linger: .seconds(30))
        let actions = interest.connectionOpened(Self.alice, conversations: ["c1": 4, "c2": 9])
        #expect(
            Set(actions) == [
                .follow(Self.conversation("c1"), position: 4), .follow(Self.conversation("c2"), position: 9),
            ])
        // A second participant, or a second connection, follows nothing more.
        #expect(interest.connectionOpened(Self.bob, conversations: ["c1": 5]) == [])
        #expect(interest.connectionOpened(Self.alice, conversations: ["c1": 5, "c2": 9]) == [])
        #expect(Set(interest.followed) == [Self.conversation("c1"), Self.conversation("c2")])
    }

    @Test func aConversationLingersAfterItsLastParticipantHereLeftThenIsDropped() {
        var interest = ConversationInterest(linger: .seconds(30))
        _ = interest.connectionOpened(Self.alice, conversations: ["c1": 1])
        _ = interest.connectionOpened(Self.alice, conversations: ["c1": 1])
        interest.connectionClosed(Self.alice, now: .seconds(1))
        #expect(interest.tick(now: .seconds(100)) == [], "alice still has a connection")
        interest.connectionClosed(Self.alice, now: .seconds(100))
        #expect(interest.tick(now: .seconds(129)) == [])
        #expect(interest.tick(now: .seconds(130)) == [.unfollow(Self.conversation("c1"))])
        #expect(interest.followed.isEmpty)
        // Followed again from the new connection's position.
        #expect(
            interest.connectionOpened(Self.alice, conversations: ["c1": 8]) == [
                .follow(Self.conversation("c1"), position: 8)
            ])
    }

    @Test func aParticipantBackWithinTheLingerKeepsItFollowedWithoutSubscribingAgain() {
        var interest = ConversationInterest(linger: .seconds(30))
        _ = interest.connectionOpened(Self.alice, conversations: ["c1": 1])
        interest.connectionClosed(Self.alice, now: .seconds(1))
        #expect(interest.connectionOpened(Self.alice, conversations: ["c1": 3]) == [])
        #expect(interest.tick(now: .seconds(60)) == [])
    }

    @Test func joinsAndDeparturesOfConnectedUsersChangeWhatIsFollowed() {
        var interest = ConversationInterest(linger: .seconds(30))
        _ = interest.connectionOpened(Self.alice, conversations: [:])
        #expect(
            interest.joined(Self.alice, conversationId: "c3", seq: 12) == [
                .follow(Self.conversation("c3"), position: 12)
            ])
        #expect(interest.joined(Self.alice, conversationId: "c3", seq: 13) == [], "joined already")
        #expect(interest.joined(Self.bob, conversationId: "c4", seq: 1) == [], "bob is not connected here")
        interest.left(Self.alice, conversationId: "c3", now: .seconds(5))
        #expect(interest.tick(now: .seconds(35)) == [.unfollow(Self.conversation("c3"))])
    }
}
