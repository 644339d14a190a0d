import Foundation
import Parley
import ParleyServer
import ParleyTesting
import Testing

/// Message search, the user directory and the inbox through the SDK, `ParleyAdmin` and the `parley` CLI
/// (docs/PROTOCOL.md, "Search", "The inbox", "Finding users"; docs/SDK.md).
@Suite(.timeLimit(.minutes(2))) struct SearchTests {
    @Test func theSDKFindsAUsersMessagesAndTheAdminTheApps() async throws {
        let party = try await EventCatalogTests().party()
        let group = try await party["alice"].createGroup(name: "Team", participants: ["bob"])
        let mine = try await party["bob"].sendTextMessage("The quarterly Café review", to: .conversation(group.id))
        let theirs = try await party["carol"].sendTextMessage("Quarterly numbers", to: .user("dave"))
        #expect(await party.server.application.fileSearchIndex())

        let found = try await party["alice"].searchMessages("quarterly cafe")
        #expect(found.results.map(\.message.id) == [mine.id] && found.nextCursor == nil)
        #expect(
            found.results.first?.snippet
                == SearchSnippet(
                    text: "The quarterly Café review",
                    matches: [TextRange(start: 4, length: 9), TextRange(start: 14, length: 4)]
                )
        )
        let filtered = try await party["alice"].searchMessages(
            "quart", filter: MessageSearchFilter(conversationId: group.id, sender: "bob"), order: .relevance
        )
        #expect(filtered.results.map(\.message.id) == [mine.id])
        #expect(try await party["dave"].searchMessages("quarterly").results.map(\.message.id) == [theirs.id])

        let admin = ParleyAdmin(serverURL: party.server.baseURL, restAPIKey: party.server.app.restAPIKey)
        #expect(try await admin.searchMessages("quarterly").results.map(\.message.id) == [theirs.id, mine.id])

        // Refusals arrive as ParleyError with the documented code.
        await #expect(throws: ParleyError.self) { _ = try await party["alice"].searchMessages("") }
        do {
            _ = try await party["alice"].searchMessages(String(repeating: "w ", count: 20))
        } catch let error as ParleyError {
            #expect(error.code == .fieldTooLarge)
        }
        try await party.stop()
    }

    @Test func theSDKFindsUsersAsTheAppsDirectoryAllows() async throws {
        let party = try await EventCatalogTests().party()
        // Names as the users gave them; the uids are words too.
        _ = try await party["bob"].updateProfile(name: "Bob Ángel")
        _ = try await party["carol"].updateProfile(name: "Carol Angelou")
        _ = try await party["alice"].createGroup(name: "Team", participants: ["bob"])

        #expect(try await party["alice"].searchUsers("angel").users.map(\.uid) == ["bob", "carol"])
        let first = try await party["alice"].searchUsers("ang", limit: 1)
        #expect(first.users.map(\.uid) == ["bob"])
        let second = try await party["alice"].searchUsers("ang", limit: 1, cursor: try #require(first.nextCursor))
        #expect(second.users.map(\.uid) == ["carol"])

        let admin = ParleyAdmin(serverURL: party.server.baseURL, restAPIKey: party.server.app.restAPIKey)
        #expect(try await admin.setUserDirectory(.contacts).userDirectory == .contacts)
        #expect(try await party["alice"].searchUsers("angel").users.map(\.uid) == ["bob"])
        #expect(try await admin.searchUsers("a").users.map(\.uid).contains("carol"))

        do {
            _ = try await party["alice"].searchUsers("**")
            Issue.record("a search without a letter is refused")
        } catch let error as ParleyError {
            #expect(error.code == .badRequest)
        }
        try await party.stop()
    }

    @Test func theSDKOpensHistoryAtAFoundMessage() async throws {
        let party = try await EventCatalogTests().party()
        let group = try await party["alice"].createGroup(name: "Team", participants: ["bob"])
        var sent: [Message] = []
        for index in 1...7 {
            sent.append(try await party["bob"].sendTextMessage("note \(index)", to: .conversation(group.id)))
        }
        let page = try await party["alice"].fetchMessages(conversationId: group.id, around: sent[3].seq, limit: 3)
        #expect(page.messages.map(\.text) == ["note 3", "note 4", "note 5"])
        let newer = try await party["alice"].fetchMessages(
            conversationId: group.id, after: Int64(try #require(page.newerCursor))!, limit: 10
        )
        #expect(newer.messages.map(\.text) == ["note 6", "note 7"] && newer.newerCursor == nil)
        try await party.stop()
    }

    @Test(.enabled(if: CLIBinary.isAvailable, "needs the parley binary")) func theCLIListsTheInboxAndArchives()
        async throws
    {
        let server = try await TestServer.start()
        let home = try TemporaryDirectory(prefix: "parley-cli-inbox")
        for uid in ["alice", "bob"] {
            let login = try await CLIFileTests.parley(["login", uid, "--profile", uid], server: server, home: home)
            #expect(login.status == 0, "\(login.errors)")
        }
        let sent = try await CLIFileTests.parley(
            ["send", "bob", "hello @bob", "--profile", "alice"], server: server, home: home)
        #expect(sent.status == 0, "\(sent.errors)")
        let list = try await CLIFileTests.parley(["conversations", "--profile", "bob"], server: server, home: home)
        #expect(
            list.status == 0 && list.output.contains("\tdirect\twith alice\t2 participants\t1 unread"), "\(list.output)"
        )
        let id = try #require(list.output.split(separator: "\t").first.map(String.init))
        let archived = try await CLIFileTests.parley(["archive", id, "--profile", "bob"], server: server, home: home)
        #expect(archived.status == 0, "\(archived.errors)")
        let empty = try await CLIFileTests.parley(["conversations", "--profile", "bob"], server: server, home: home)
        #expect(empty.output.contains("No conversations yet."), "\(empty.output)")
        let shown = try await CLIFileTests.parley(
            ["conversations", "--archived", "--profile", "bob"], server: server, home: home)
        #expect(shown.output.hasPrefix(id), "\(shown.output)")
        let unknown = try await CLIFileTests.parley(
            ["archive", "c_nope", "--profile", "bob"], server: server, home: home)
        #expect(unknown.status != 0 && unknown.errors.contains("ERR_CONVERSATION_NOT_FOUND"), "\(unknown.errors)")
        let again = try await CLIFileTests.parley(
            ["send", "bob", "still there?", "--profile", "alice"], server: server, home: home)
        #expect(again.status == 0)
        let back = try await CLIFileTests.parley(
            ["conversations", "--unread", "--profile", "bob"], server: server, home: home)
        #expect(back.output.contains("\(id)\tdirect\twith alice\t2 participants\t2 unread"), "\(back.output)")
        try await server.stop()
    }

    @Test(.enabled(if: CLIBinary.isAvailable, "needs the parley binary")) func theCLIShowsWhatItFoundMarked()
        async throws
    {
        let server = try await TestServer.start()
        let home = try TemporaryDirectory(prefix: "parley-cli-search")
        for uid in ["alice", "bob"] {
            let login = try await CLIFileTests.parley(["login", uid, "--profile", uid], server: server, home: home)
            #expect(login.status == 0, "\(login.errors)")
        }
        let sent = try await CLIFileTests.parley(
            ["send", "bob", "the Quarterly report is in", "--profile", "alice"], server: server, home: home
        )
        #expect(sent.status == 0, "\(sent.errors)")
        #expect(await server.application.fileSearchIndex())
        let search = try await CLIFileTests.parley(
            ["search", "quarterly", "rep", "--profile", "bob"], server: server, home: home)
        #expect(search.status == 0, "\(search.errors)")
        #expect(search.output.contains(" alice: the *Quarterly* *report* is in"), "\(search.output)")
        let nothing = try await CLIFileTests.parley(
            ["search", "annual", "--profile", "bob"], server: server, home: home)
        #expect(nothing.output.contains("Nothing found."))
        let refused = try await CLIFileTests.parley(["search", "--profile", "bob"], server: server, home: home)
        #expect(refused.status != 0 && refused.errors.contains("ERR_BAD_REQUEST"), "\(refused.errors)")

        // Users: a user's search, and the operator's with the app's setting.
        let people = try await CLIFileTests.parley(["users", "ali", "--profile", "bob"], server: server, home: home)
        #expect(people.status == 0 && people.output.contains("alice\talice"), "\(people.output) \(people.errors)")
        let key = ["--api-key", server.app.restAPIKey]
        let setting = try await CLIFileTests.parley(
            ["admin", "app", "--user-directory", "contacts"] + key, server: server, home: home)
        #expect(setting.output.contains("User directory: contacts"), "\(setting.output) \(setting.errors)")
        let admin = try await CLIFileTests.parley(
            ["admin", "users", "--search", "bo"] + key, server: server, home: home)
        #expect(admin.status == 0 && admin.output.contains("bob\tbob"), "\(admin.output) \(admin.errors)")
        let wrong = try await CLIFileTests.parley(
            ["admin", "app", "--user-directory", "nobody"] + key, server: server, home: home)
        #expect(wrong.status == 2, "\(wrong.errors)")
        try await server.stop()
    }
}
