import Parley
import ParleyServer
import ParleyTesting
import Testing

/// `unread.update` carries the user's total over all their conversations. The server reads every conversation of a
/// user once and then only those that change (moving the total by the difference): these check the total it pushes
/// against the counts read whole, through every change a count can see.
extension EventCatalogTests {
    /// No budget runs out here: every count goes out with the batch that changed it.
    static func unlimitedPushes(_ configuration: inout ServerConfiguration) {
        configuration.unreadPushBurst = 1000
    }

    @Test func theTotalPushedFollowsEveryChangeOfAUserInManyConversations() async throws {
        try await totalPushedFollowsEveryChange(databaseURL: nil)
    }

    /// On PostgreSQL no count is read with the batch: the notifier moves the totals by the events it publishes and
    /// reads only what they cannot tell (deletions, departures).
    @Test(.enabled(if: PostgresTestDatabase.isConfigured, "needs PARLEY_TEST_DATABASE_URL (scripts/test)"))
    func theTotalPushedFollowsEveryChangeOnPostgreSQL() async throws {
        let database = try await PostgresTestDatabase.create(prefix: "parley_unread")
        try await totalPushedFollowsEveryChange(databaseURL: database.url)
        try await database.drop()
    }

    func totalPushedFollowsEveryChange(databaseURL: String?) async throws {
        let party = try await party(
            ["alice", "bob", "carol"], databaseURL: databaseURL, configure: Self.unlimitedPushes)
        let alice = party["alice"]
        var groups: [String] = []
        for index in 0..<4 {
            groups.append(try await alice.createGroup(name: "g\(index)", participants: ["bob", "carol"]).id)
        }
        try await party.fence()

        /// After `action`: Bob is pushed `total` (nothing when `pushed` is false), and it is what his counts read whole
        /// add up to.
        func expectTotal(
            _ total: Int, pushed: Bool = true, sourceLocation: SourceLocation = #_sourceLocation,
            after action: () async throws -> Void
        ) async throws {
            party.mark()
            try await action()
            try await party.fence()
            if pushed {
                let push = await party.waitFor("bob") { event in
                    guard case .unreadUpdated(let summary) = event.payload else { return false }
                    return summary.total == total
                }
                #expect(push != nil, "no push of \(total)", sourceLocation: sourceLocation)
            }
            let pushes = party.observed(by: "bob", ignoring: []).compactMap { event -> UnreadSummary? in
                guard case .unreadUpdated(let summary) = event.payload else { return nil }
                return summary
            }
            #expect(pushed ? pushes.last?.total == total : pushes.isEmpty, "\(pushes)", sourceLocation: sourceLocation)
            #expect(try await party["bob"].unreadCounts().total == total, sourceLocation: sourceLocation)
        }

        // The first push reads everything (by the notifier's task); the next ones, with their message, only the
        // conversation that changed.
        var sent: [Message] = []
        try await expectTotal(1) { sent.append(try await alice.sendTextMessage("a", to: .conversation(groups[0]))) }
        try await expectTotal(2) { _ = try await alice.sendTextMessage("b", to: .conversation(groups[1])) }
        try await expectTotal(4) {
            for text in ["c", "d"] { sent.append(try await alice.sendTextMessage(text, to: .conversation(groups[0]))) }
        }
        try await expectTotal(5) { _ = try await alice.sendTextMessage("e", to: .conversation(groups[2])) }
        // Bob's own message where he has nothing unread changes nothing; reading takes a count off the total.
        try await expectTotal(5, pushed: false) {
            _ = try await party["bob"].sendTextMessage("f", to: .conversation(groups[3]))
        }
        try await expectTotal(4) {
            let last = try await alice.sendTextMessage("g", to: .conversation(groups[1]))
            try await party["bob"].markRead(upTo: last.seq, in: groups[1])
        }
        // A deleted unread message, a conversation Bob is removed from.
        try await expectTotal(3) { _ = try await alice.deleteMessage(sent[1].id, in: groups[0]) }
        try await expectTotal(2) { try await alice.removeParticipant("bob", from: groups[2]) }
        // Past the ledger's lifetime (one to two minutes) the total is read whole again.
        party.clock.advance(by: .seconds(121))
        try await expectTotal(0) { try await alice.deleteConversation(groups[0]) }
        // Another user's message; then Bob answers it, which reads the conversation: his count there falls to 0, told
        // with his next push.
        try await expectTotal(1) { _ = try await party["carol"].sendTextMessage("h", to: .conversation(groups[3])) }
        _ = try await party["bob"].sendTextMessage("i", to: .conversation(groups[3]))
        #expect(try await party["bob"].unreadCounts().total == 0)
        try await expectTotal(1) { _ = try await party["carol"].sendTextMessage("j", to: .conversation(groups[3])) }
        try await party.stop()
    }

    @Test func aUserInMoreConversationsThanABatchReadsIsReadWholeByTheNotifier() async throws {
        let party = try await party(["alice", "bob"], configure: Self.unlimitedPushes)
        let alice = party["alice"]
        // More than a batch reads whole (16), Bob's notes group with them.
        var groups: [String] = []
        for index in 0..<20 {
            groups.append(try await alice.createGroup(name: "g\(index)", participants: ["bob"]).id)
        }
        try await party.fence()
        party.mark()
        // The first count is read whole (a batch would not: the notifier's task does), the next ones with their
        // message.
        _ = try await alice.sendTextMessage("x", to: .conversation(groups[19]))
        #expect(await party.waitForUnread("bob", 1, in: groups[19])?.total == 1)
        for (index, group) in groups.prefix(3).enumerated() {
            for text in 0...index { _ = try await alice.sendTextMessage("\(text)", to: .conversation(group)) }
        }
        _ = try await alice.sendTextMessage("y", to: .conversation(groups[0]))
        #expect(await party.waitForUnread("bob", 2, in: groups[0])?.total == 8)
        #expect(try await party["bob"].unreadCounts().total == 8)
        try await party.stop()
    }

    @Test func aUserAwayWhileTheirCountsChangeGetsTheWholeTotalWhenBack() async throws {
        let party = try await party(["alice", "bob"], configure: Self.unlimitedPushes)
        let alice = party["alice"]
        let first = try await alice.createGroup(name: "first", participants: ["bob"]).id
        let second = try await alice.createGroup(name: "second", participants: ["bob"]).id
        try await party.fence()
        _ = try await alice.sendTextMessage("a", to: .conversation(first))
        #expect(await party.waitForUnread("bob", 1, in: first)?.total == 1)

        // Bob's counts change while no connection of his is here: nothing is pushed, and what the server kept of his
        // total is stale.
        let bob = party["bob"]
        let before = await party.server.snapshot().liveConnections
        await bob.disconnect()
        _ = await party.server.snapshot { $0.liveConnections == before - 1 }
        for text in ["b", "c"] { _ = try await alice.sendTextMessage(text, to: .conversation(second)) }
        try await bob.connect()
        await bob.waitUntilConnected()

        party.mark()
        _ = try await alice.sendTextMessage("d", to: .conversation(first))
        let pushed = await party.waitForUnread("bob", 2, in: first)
        #expect(pushed?.total == 4, "\(String(describing: pushed))")
        #expect(try await bob.unreadCounts().total == 4)
        try await party.stop()
    }
}
