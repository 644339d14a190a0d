import ParleyStorePostgres
import Testing

/// Reading `--database-url`: no server needed.
@Suite struct PostgresDatabaseURLTests {
    @Test func aFullURLGivesEveryPart() throws {
        let url = try PostgresDatabaseURL(
            "postgres://parley:s%40cret@db.internal:6543/chat?sslmode=require&application_name=node-1")
        #expect(url.host == "db.internal" && url.port == 6543 && url.username == "parley" && url.password == "s@cret")
        #expect(url.database == "chat" && url.tlsMode == .require && url.applicationName == "node-1")
        #expect(url.unixSocketPath == nil)
    }

    @Test func defaultsFollowLibpq() throws {
        let url = try PostgresDatabaseURL("postgresql://parley@localhost")
        #expect(url.port == 5432 && url.password == nil && url.database == nil && url.tlsMode == .prefer)
    }

    @Test func aSocketDirectoryIsAUnixSocket() throws {
        #expect(
            try PostgresDatabaseURL("postgres://parley@%2Fvar%2Frun%2Fpostgresql/chat").unixSocketPath
                == "/var/run/postgresql/.s.PGSQL.5432")
        #expect(
            try PostgresDatabaseURL("postgres://parley@localhost:5433/chat?host=/tmp").unixSocketPath
                == "/tmp/.s.PGSQL.5433")
    }

    @Test func theDescriptionHidesThePassword() throws {
        let url = try PostgresDatabaseURL("postgres://parley:hunter2@127.0.0.1:5432/chat")
        #expect(url.description == "postgres://parley:***@127.0.0.1:5432/chat")
        #expect(!"\(url)".contains("hunter2"))
    }

    @Test func unusableURLsAreRefusedWithACode() {
        for bad in [
            "mysql://x@y/z", "postgres://db.internal/chat", "postgres://u@h:99999/d", "postgres://u@h/d?sslmode=maybe",
            "not a url",
        ] {
            #expect(throws: PostgresStoreError.self, "\(bad)") { try PostgresDatabaseURL(bad) }
            #expect((try? PostgresDatabaseURL(bad)) == nil)
        }
        do {
            _ = try PostgresDatabaseURL("postgres://db.internal/chat")
        } catch let error as PostgresStoreError {
            #expect(error.code == .invalidURL)
        } catch {
            Issue.record("unexpected \(error)")
        }
    }
}
