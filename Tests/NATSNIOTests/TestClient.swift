import NATSNIO
import NIOConcurrencyHelpers
import ParleyTesting

/// A connection running in the background for a test, with its events collected.
final class TestClient: Sendable {
    let connection: NATSConnection
    let events = Collector<NATSConnectionEvent>()
    private let runTask: NIOLockedValueBox<Task<Result<Void, any Error>, Never>?> = NIOLockedValueBox(nil)
    private let eventsTask: NIOLockedValueBox<Task<Void, Never>?> = NIOLockedValueBox(nil)

    init(_ configuration: NATSConfiguration) {
        self.connection = NATSConnection(configuration: configuration, logger: testLogger())
        let connection = self.connection
        let events = self.events
        self.eventsTask.withLockedValue {
            $0 = Task {
                for await event in connection.events {
                    events.append([event])
                }
            }
        }
        self.runTask.withLockedValue {
            $0 = Task {
                do {
                    try await connection.run()
                    return .success(())
                } catch {
                    return .failure(error)
                }
            }
        }
    }

    deinit {
        self.runTask.withLockedValue { $0?.cancel() }
    }

    /// A client for these URLs, connected.
    static func connected(
        _ urls: String, configure: (inout NATSConfiguration) -> Void = { _ in }
    ) async throws -> TestClient {
        let client = TestClient(try testConfiguration(urls, configure: configure))
        try await client.connection.waitUntilConnected(timeout: .seconds(15))
        return client
    }

    /// Cancels `run()` and waits for it to end (drain included) and for the events stream to finish.
    @discardableResult
    func close() async -> Result<Void, any Error> {
        let task = self.runTask.withLockedValue { $0 }!
        task.cancel()
        let result = await task.value
        await self.eventsTask.withLockedValue { $0 }!.value
        return result
    }

    /// Waits for `run()` to end by itself.
    func runResult(timeout: Duration = .seconds(60)) async throws -> Result<Void, any Error> {
        let task = self.runTask.withLockedValue { $0 }!
        let done = Collector<Result<Void, any Error>>()
        let watcher = Task { done.append([await task.value]) }
        defer { watcher.cancel() }
        return try await done.wait(for: "run() to end", timeout: timeout) { !$0.isEmpty }[0]
    }

    /// Reads an inbox in the background into a collector, until the inbox finishes.
    func consume(_ inbox: NATSInbox) -> Collector<NATSMessage> {
        let collector = Collector<NATSMessage>()
        Task {
            while let batch = await inbox.nextBatch() {
                collector.append(batch)
            }
        }
        return collector
    }
}
