import Foundation
import Logging
import ParleyStore
import ParleyStorePostgres
import ParleyStoreSQLite

/// The store a store-level scenario fills: SQLite in a temporary directory of its own, or an empty PostgreSQL database,
/// with one app (`app`) in it.
struct BenchStore {
    let store: any ParleyStore
    /// SQLite's directory, removed by ``remove()``.
    private let directory: String?

    static let app = "app"

    static func open(databaseURL: String?, name: String) async throws -> BenchStore {
        let store: any ParleyStore
        var directory: String?
        if let databaseURL {
            store = try await PostgresStore.connect(
                url: databaseURL, logger: Logger(label: "bench"), timeout: .seconds(60))
        } else {
            let path = NSTemporaryDirectory() + "parley-\(name)-bench-\(UInt32.random(in: 0...UInt32.max))"
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            store = try SQLiteStore(path: path + "/parley.sqlite")
            directory = path
        }
        try await store.insertApp(
            AppRecord(id: app, name: app, authKeyHash: [1], restAPIKeyHash: [2], createdAt: 1))
        return BenchStore(store: store, directory: directory)
    }

    /// Closes the store and removes SQLite's directory.
    func remove() async throws {
        try await store.close()
        if let directory { try? FileManager.default.removeItem(atPath: directory) }
    }
}
