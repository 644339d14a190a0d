import PostgresNIO
import Testing

@testable import ParleyStorePostgres

/// The statements prepared once per connection: each its own name as PostgreSQL keeps it (63 bytes at most; longer
/// names are cut, and the cut names of two statements were one), and the text its call site builds.
@Suite struct PreparedStatementsTests {
    @Test func everyStatementHasANameOfItsOwnThatPostgreSQLKeepsWhole() {
        let names = [
            Prepared<BatchTransaction.LockConversations>.name, Prepared<BatchTransaction.Senders>.name,
            Prepared<BatchTransaction.WriteSends>.name, Prepared<PostgresStore.UnreadCounts>.name,
            Prepared<PostgresStore.Contacts>.name,
        ]
        #expect(Set(names).count == names.count, "\(names)")
        #expect(names.allSatisfy { $0.utf8.count <= 63 }, "\(names)")
    }

    @Test func theTextDoesNotDependOnTheValuesBound() {
        #expect(
            BatchTransaction.lockConversationsQuery(["a", "b"]).sql == BatchTransaction.LockConversations.sql)
        #expect(BatchTransaction.sendersQuery([1, 2, 3]).sql == BatchTransaction.Senders.sql)
        #expect(
            PostgresStore.unreadQuery([0], ["a"], ["u"], ["c"], [1], ["a"], ["v"]).sql
                == PostgresStore.UnreadCounts.sql)
        #expect(PostgresStore.contactsQuery(appId: "a", uids: ["u", "v"]).sql == PostgresStore.Contacts.sql)
    }
}
