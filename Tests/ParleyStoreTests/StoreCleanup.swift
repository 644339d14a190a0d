import Logging
import ParleyStore
import ParleyTesting
import Testing

/// Closes the stores a test case opened, and drops their PostgreSQL databases, when the test case ends.
///
/// Applied to a suite, it scopes each test case: ``register(_:database:)`` (called by `Backend.makeStore()`) records
/// into the case's task-local registry.
struct StoreCleanup: SuiteTrait, TestTrait, TestScoping {
    var isRecursive: Bool { true }

    @TaskLocal static var current: Registry?

    /// Closes `store` and drops `database` at the end of the current test case.
    static func register(_ store: (any ParleyStore)? = nil, database: PostgresTestDatabase? = nil) async {
        await current?.add(store, database)
    }

    func scopeProvider(for test: Test, testCase: Test.Case?) -> StoreCleanup? {
        testCase == nil ? nil : self
    }

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        let registry = Registry()
        do {
            try await Self.$current.withValue(registry) { try await function() }
        } catch {
            await registry.cleanUp()
            throw error
        }
        await registry.cleanUp()
    }

    actor Registry {
        private var stores: [any ParleyStore] = []
        private var databases: [PostgresTestDatabase] = []

        func add(_ store: (any ParleyStore)?, _ database: PostgresTestDatabase?) {
            if let store { stores.append(store) }
            if let database { databases.append(database) }
        }

        /// Closes the stores, then drops the databases.
        func cleanUp() async {
            let (stores, databases) = (self.stores, self.databases)
            (self.stores, self.databases) = ([], [])
            for store in stores { try? await store.close() }
            for database in databases { try? await database.drop() }
        }
    }
}

extension Logger {
    /// A logger for stores under test: errors only.
    static var quiet: Logger {
        var logger = Logger(label: "parley.test")
        logger.logLevel = .error
        return logger
    }
}
