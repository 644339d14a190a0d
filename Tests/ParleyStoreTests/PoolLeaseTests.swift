import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import ParleyTesting
import PostgresNIO
import Testing

@testable import ParleyStorePostgres

/// An operation's wait for a pool connection ends in bounded time (``PoolLease``): at its timeout (virtual time) or
/// when its caller is cancelled, and an operation given up never runs later.
@Suite(
    .enabled(if: PostgresTestDatabase.isConfigured, "needs PARLEY_TEST_DATABASE_URL (scripts/test)"),
    .timeLimit(.minutes(2))
)
struct PoolLeaseTests {
    struct NoConnection: Error {}

    /// A pool of one connection on a fresh database, running while `body` runs.
    func withPoolOfOne(_ body: (PostgresClient) async throws -> Void) async throws {
        let database = try await PostgresTestDatabase.create(prefix: "parley_lease")
        let url = try PostgresDatabaseURL(database.url)
        let client = PostgresClient(
            configuration: try url.clientConfiguration(maximumConnections: 1),
            backgroundLogger: Logger(label: "test.pool")
        )
        let running = Task { await client.run() }
        do {
            try await body(client)
        } catch {
            running.cancel()
            await running.value
            try await database.drop()
            throw error
        }
        running.cancel()
        await running.value
        try await database.drop()
    }

    /// Holds the pool's only connection until `release()`.
    final class Holder: Sendable {
        private let state = NIOLockedValueBox<
            (held: PostgresConnection?, release: CheckedContinuation<Void, Never>?, done: Bool)
        >((nil, nil, false))
        var held: Bool { state.withLockedValue { $0.held != nil } }
        var connection: PostgresConnection? { state.withLockedValue { $0.held } }

        func hold(_ connection: PostgresConnection) async {
            await withCheckedContinuation { continuation in
                let released = state.withLockedValue { state -> Bool in
                    state.held = connection
                    if state.done { return true }
                    state.release = continuation
                    return false
                }
                if released { continuation.resume() }
            }
        }

        func release() {
            let continuation = state.withLockedValue { state in
                state.done = true
                defer { state.release = nil }
                return state.release
            }
            continuation?.resume()
        }
    }

    /// An operation that holds the pool's only connection until the holder releases it.
    func holdTheOnlyConnection(of client: PostgresClient) async throws -> (Holder, Task<Void, any Error>) {
        let holder = Holder()
        let holding = Task {
            try await PoolLease.run(on: client, timeout: .seconds(60), timeoutError: NoConnection()) {
                await holder.hold($0)
            }
        }
        try #require(await eventually { holder.held })
        return (holder, holding)
    }

    @Test func anOperationWithNoConnectionWithinItsTimeoutFailsAndNeverRunsLater() async throws {
        try await withPoolOfOne { client in
            let (holder, holding) = try await holdTheOnlyConnection(of: client)
            let loop = NIOAsyncTestingEventLoop()
            let ran = NIOLockedValueBox(false)
            let outcome = NIOLockedValueBox<(any Error)??>(nil)
            let waiting = Task {
                do {
                    try await PoolLease.run(
                        on: client, timer: loop, timeout: .seconds(30), timeoutError: NoConnection()
                    ) { _ in ran.withLockedValue { $0 = true } }
                    outcome.withLockedValue { $0 = .some(nil) }
                } catch {
                    outcome.withLockedValue { $0 = .some(error) }
                }
            }
            // Not given up before its timeout (29 s of virtual time)...
            await loop.advanceTime(by: .seconds(29))
            #expect(outcome.withLockedValue { $0 } == nil)
            // ...and given up at it: the timer is set as the wait starts, so a few rounds of 30 s find it.
            var rounds = 0
            while outcome.withLockedValue({ $0 }) == nil, rounds < 20 {
                await loop.advanceTime(by: .seconds(30))
                _ = await eventually(timeout: .milliseconds(200)) { outcome.withLockedValue { $0 } != nil }
                rounds += 1
            }
            await waiting.value
            let error = try #require(outcome.withLockedValue { $0 } ?? nil)
            #expect(error is NoConnection, "\(error)")
            // The connection comes free: the request given up gets it first, and must not run on it.
            holder.release()
            try await holding.value
            let after = try await PoolLease.run(on: client, timeout: .seconds(60), timeoutError: NoConnection()) {
                try await $0.query("SELECT 1", logger: Logger(label: "test")).collect().count
            }
            #expect(after == 1)
            #expect(ran.withLockedValue { $0 } == false)
            await loop.shutdownGracefully()
        }
    }

    @Test func aCancelledCallerStopsWaitingForAConnectionAtOnce() async throws {
        try await withPoolOfOne { client in
            let (holder, holding) = try await holdTheOnlyConnection(of: client)
            let ran = NIOLockedValueBox(false)
            let waiting = Task {
                try await PoolLease.run(on: client, timeout: .seconds(3600), timeoutError: NoConnection()) { _ in
                    ran.withLockedValue { $0 = true }
                }
            }
            waiting.cancel()
            await #expect(throws: CancellationError.self) { try await waiting.value }
            holder.release()
            try await holding.value
            _ = try await PoolLease.run(on: client, timeout: .seconds(60), timeoutError: NoConnection()) {
                try await $0.query("SELECT 1", logger: Logger(label: "test")).collect()
            }
            #expect(ran.withLockedValue { $0 } == false)
        }
    }

    /// Cancelled while its operation runs, the caller gets CancellationError without waiting for the operation (a
    /// query that never gets an answer would hold it for ever); the connection is released when the operation ends.
    @Test func aCancelledCallerStopsWaitingForARunningOperation() async throws {
        try await withPoolOfOne { client in
            let holder = Holder()
            let caller = Task {
                try await PoolLease.run(on: client, timeout: .seconds(60), timeoutError: NoConnection()) {
                    await holder.hold($0)
                }
            }
            #expect(await eventually { holder.held })
            caller.cancel()
            await #expect(throws: CancellationError.self) { try await caller.value }
            holder.release()
            let count = try await PoolLease.run(on: client, timeout: .seconds(60), timeoutError: NoConnection()) {
                try await $0.query("SELECT 1", logger: Logger(label: "test")).collect().count
            }
            #expect(count == 1)
        }
    }

    /// The connection an operation runs on closes (the network failed) and the operation's answer can never come:
    /// its caller gets an error at the next look, not for ever nothing.
    @Test func anOperationWhoseConnectionClosesFailsAtTheNextLook() async throws {
        try await withPoolOfOne { client in
            let holder = Holder()
            let loop = NIOAsyncTestingEventLoop()
            let outcome = NIOLockedValueBox<(any Error)??>(nil)
            let caller = Task {
                do {
                    try await PoolLease.run(
                        on: client, timer: loop, timeout: .seconds(30), timeoutError: NoConnection()
                    ) { await holder.hold($0) }
                    outcome.withLockedValue { $0 = .some(nil) }
                } catch {
                    outcome.withLockedValue { $0 = .some(error) }
                }
            }
            #expect(await eventually { holder.held })
            // Still running at the looks before the close.
            await loop.advanceTime(by: .seconds(5))
            #expect(outcome.withLockedValue { $0 } == nil)
            try await #require(holder.connection).close()
            await loop.advanceTime(by: .seconds(1))
            #expect(await eventually { outcome.withLockedValue { $0 } != nil })
            await caller.value
            let error = try #require(outcome.withLockedValue { $0 } ?? nil)
            #expect((error as? PostgresStoreError)?.code == .database, "\(error)")
            holder.release()
            await loop.shutdownGracefully()
        }
    }
}
