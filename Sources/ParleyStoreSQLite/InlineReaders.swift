import Foundation
import GRDB

/// The read-only connections that answer ``InlineReads``, each lent to one caller at a time.
///
/// `DatabasePool.read` costs more than the handshake's reads themselves. Profiled in `parley-bench connect` (three
/// inline reads per connection: the token, the catch-up state, the contacts), GRDB's side of them was 207 µs of the
/// server's 852 µs per connection, the queries 119 µs: taking a reader from its pool (a semaphore and a lock on a
/// concurrent dispatch queue, which the two event loops contend for), a `BEGIN` and a `COMMIT` compiled anew for every
/// read, and a `PRAGMA schema_version` per read. Here a caller takes an idle connection off a locked stack and runs its
/// reads on its own thread, in a transaction begun and ended with cached statements. The schema never changes while
/// the store is open (migrations run before), so there is nothing to check.
///
/// At most ``limit`` connections are opened (one per thread reading at the same time: the event loops, and the tasks
/// that read presence and unread counts); past that, a read goes through the pool.
final class InlineReaders: @unchecked Sendable {
    // `@unchecked Sendable` is sound: `path`, `configuration`, `limit` and `pool` are immutable (`DatabasePool` is
    // Sendable), and `state` is only read or written with `lock` held. A connection taken off `state.idle` is used by
    // the one caller that took it until it puts it back; one still lent when the store closes is closed by its caller.
    private let path: String
    private let configuration: Configuration
    private let pool: DatabasePool
    let limit: Int
    private let lock = NSLock()
    private var state = State()

    private struct State {
        var idle: [DatabaseQueue] = []
        var opened = 0
        var closed = false
    }

    private enum Lent {
        case connection(DatabaseQueue)
        case open
        case pool
    }

    /// - Parameter configuration: the pool's configuration; the connections are opened read-only with it.
    init(path: String, configuration: Configuration, pool: DatabasePool, limit: Int = 8) {
        var configuration = configuration
        configuration.readonly = true
        configuration.label = "parley.sqlite.inline-reader"
        self.path = path
        self.configuration = configuration
        self.pool = pool
        self.limit = limit
    }

    /// Connections opened so far.
    var openedCount: Int { lock.withLock { state.opened } }

    /// Runs `body` in one read transaction (a snapshot of the database) on the caller's thread.
    func read<T>(_ body: (Database) throws -> T) throws -> T {
        let lent: Lent = lock.withLock {
            if let connection = state.idle.popLast() { return .connection(connection) }
            guard !state.closed, state.opened < limit else { return .pool }
            state.opened += 1
            return .open
        }
        let connection: DatabaseQueue
        switch lent {
        case .pool:
            return try pool.read(body)
        case .connection(let idle):
            connection = idle
        case .open:
            do {
                connection = try DatabaseQueue(path: path, configuration: configuration)
            } catch {
                lock.withLock { state.opened -= 1 }
                throw error
            }
        }
        defer { giveBack(connection) }
        return try connection.inDatabase { db in
            try db.cachedStatement(sql: "BEGIN DEFERRED TRANSACTION").execute()
            do {
                let result = try body(db)
                try db.cachedStatement(sql: "COMMIT TRANSACTION").execute()
                return result
            } catch {
                // The connection goes back between transactions (GRDB stops the process when one is left open).
                try? db.rollback()
                throw error
            }
        }
    }

    private func giveBack(_ connection: DatabaseQueue) {
        let keep = lock.withLock {
            guard !state.closed else { return false }
            state.idle.append(connection)
            return true
        }
        if !keep { try? connection.close() }
    }

    /// Closes the idle connections; one still lent is closed when its read ends. Reads from now on go through the
    /// pool (which fails once closed).
    func close() {
        let idle = lock.withLock {
            state.closed = true
            defer { state.idle = [] }
            return state.idle
        }
        for connection in idle { try? connection.close() }
    }
}
