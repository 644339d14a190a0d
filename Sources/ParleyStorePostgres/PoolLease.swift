import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PostgresNIO

/// One operation on a connection of postgres-nio's pool, whose caller never waits for ever.
///
/// After the network to PostgreSQL stalled and its connections were reset, operations were seen to wait for ever
/// (postgres-nio 1.33): a request waiting for a connection that the pool never served, though a new connection came
/// up and sat idle, and a query on a connection that closed as it was leased, whose answer can never come. Cancelling
/// the waiting task ended neither. Whoever waited then waited for ever: the webhook loop, and with it the server's
/// graceful shutdown (`HealthTests` stalls and resets the network to the database).
///
/// So the operation runs in a task of its own, and the caller stops waiting for it:
/// - when no connection came within ``PostgresStore/leaseTimeout``; a connection that comes later is released at once,
///   the operation not run;
/// - when the connection it runs on has closed (looked at every ``checkInterval``): its answer cannot come;
/// - when the caller is cancelled, at once; an operation under way runs on and its outcome is dropped, as if the
///   network had failed before the outcome came.
final class PoolLease<Value: Sendable>: Sendable {
    private enum State {
        case waiting(CheckedContinuation<Value, any Error>?)
        /// A connection came: the operation runs on it, and its outcome goes to the caller.
        case running(CheckedContinuation<Value, any Error>?, PostgresConnection)
        /// The caller stopped waiting before a connection came (with this error, if no continuation was there yet).
        case abandoned(any Error)
        case finished
    }

    /// How often a waiting or running operation is looked at.
    static var checkInterval: TimeAmount { .seconds(1) }

    private let state = NIOLockedValueBox(State.waiting(nil))

    /// Runs `operation` on a connection of `client`'s pool, waiting at most `timeout` for it (on `timer`'s clock).
    static func run(
        on client: PostgresClient, timer: any EventLoop = NIOSingletons.posixEventLoopGroup.next(),
        timeout: TimeAmount, timeoutError: @autoclosure @escaping @Sendable () -> any Error,
        _ operation: @escaping @Sendable (PostgresConnection) async throws -> Value
    ) async throws -> Value {
        let lease = PoolLease()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                guard lease.attach(continuation) else { return }
                let checks = lease.check(on: timer, deadline: timer.now + timeout, timeoutError: timeoutError)
                Task {
                    do {
                        let value = try await client.withConnection { connection in
                            guard lease.begin(on: connection) else { throw CancellationError() }
                            return try await operation(connection)
                        }
                        lease.finish(.success(value))
                    } catch {
                        lease.finish(.failure(error))
                    }
                    checks.cancel()
                }
            }
        } onCancel: {
            lease.abandon(CancellationError())
        }
    }

    /// Looks at the operation every ``checkInterval`` until it ends (the returned handle cancels the checks).
    private func check(
        on loop: any EventLoop, deadline: NIODeadline, timeoutError: @escaping @Sendable () -> any Error
    ) -> Checks {
        let checks = Checks()
        @Sendable func schedule() {
            checks.set(
                loop.scheduleTask(in: Self.checkInterval) {
                    switch self.look(now: loop.now, deadline: deadline) {
                    case .keepLooking: schedule()
                    case .timedOut: self.abandon(timeoutError(), running: false)
                    case .connectionClosed:
                        self.abandon(
                            PostgresStoreError(.database, "The connection to PostgreSQL closed during the operation."),
                            running: true)
                    case .done: break
                    }
                })
        }
        schedule()
        return checks
    }

    private enum Look { case keepLooking, timedOut, connectionClosed, done }

    private func look(now: NIODeadline, deadline: NIODeadline) -> Look {
        state.withLockedValue { state in
            switch state {
            case .waiting: return now >= deadline ? .timedOut : .keepLooking
            case .running(_, let connection): return connection.isClosed ? .connectionClosed : .keepLooking
            case .abandoned, .finished: return .done
            }
        }
    }

    /// Keeps the caller's continuation; false (the continuation resumed) when the caller was cancelled already.
    private func attach(_ continuation: CheckedContinuation<Value, any Error>) -> Bool {
        let abandoned: (any Error)? = state.withLockedValue { state in
            switch state {
            case .waiting:
                state = .waiting(continuation)
                return nil
            case .abandoned(let error):
                state = .finished
                return error
            case .running, .finished:
                preconditionFailure("a lease is attached once, first")
            }
        }
        guard let abandoned else { return true }
        continuation.resume(throwing: abandoned)
        return false
    }

    /// A connection came: whether to run the operation on it.
    private func begin(on connection: PostgresConnection) -> Bool {
        state.withLockedValue { state in
            guard case .waiting(let continuation) = state else { return false }
            state = .running(continuation, connection)
            return true
        }
    }

    /// The caller stops waiting: while no connection came (`running` false) or at any time (true).
    private func abandon(_ error: any Error, running: Bool = true) {
        let continuation: CheckedContinuation<Value, any Error>? = state.withLockedValue { state in
            switch state {
            case .waiting(let continuation):
                state = continuation == nil ? .abandoned(error) : .finished
                return continuation
            case .running(let continuation, _) where running:
                state = .finished
                return continuation
            case .running, .abandoned, .finished:
                return nil
            }
        }
        continuation?.resume(throwing: error)
    }

    private func finish(_ outcome: Result<Value, any Error>) {
        let continuation: CheckedContinuation<Value, any Error>? = state.withLockedValue { state in
            switch state {
            case .waiting(let continuation), .running(let continuation, _):
                state = .finished
                return continuation
            case .abandoned, .finished:
                return nil
            }
        }
        continuation?.resume(with: outcome)
    }

    /// The scheduled look at an operation, replaced at every look; cancelled when the operation ends.
    private final class Checks: Sendable {
        private let scheduled = NIOLockedValueBox<(task: Scheduled<Void>?, cancelled: Bool)>((nil, false))

        func set(_ task: Scheduled<Void>) {
            let cancelled = scheduled.withLockedValue { scheduled in
                scheduled.task = task
                return scheduled.cancelled
            }
            if cancelled { task.cancel() }
        }

        func cancel() {
            scheduled.withLockedValue { scheduled in
                scheduled.cancelled = true
                return scheduled.task
            }?.cancel()
        }
    }
}
