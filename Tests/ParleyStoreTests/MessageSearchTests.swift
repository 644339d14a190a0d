import ParleyProtocol
import ParleyStore
import Testing

/// The search's words, queries and snippets, without a database (docs/PROTOCOL.md, "Search").
struct MessageSearchTests {
    func message(_ text: String, file: String? = nil, deleted: Bool = false) -> Message {
        var parts: [MessagePart] = [.text(text)]
        if let file {
            parts.append(
                MessagePart(type: .file, file: FileInfo(id: "f", name: file, contentType: "", size: 1, sha256: ""))
            )
        }
        return Message(
            id: "m", conversationId: "c", seq: 1, sender: "a", parts: deleted ? [] : parts, sentAt: 1,
            deletedAt: deleted ? 2 : nil
        )
    }

    @Test func wordsAreLettersAndDigitsFoldedAndLowercased() {
        #expect(MessageSearch.tokens("Crème BRÛLÉE, naïve café!") == ["creme", "brulee", "naive", "cafe"])
        #expect(
            MessageSearch.tokens("e-mail: bob@example.com v2.0") == ["e", "mail", "bob", "example", "com", "v2", "0"])
        #expect(MessageSearch.tokens("Straße ΑΘΗΝΑ Ελλάδα") == ["straße", "αθηνα", "ελλαδα"])
        #expect(MessageSearch.tokens("東京タワー 123") == ["東京タワー", "123"])
        #expect(MessageSearch.tokens("👍🏽 -- ... ") == [])
        #expect(MessageSearch.tokens(String(repeating: "a", count: 100)) == [String(repeating: "a", count: 64)])
        #expect(MessageSearch.words(of: message("Hello, World", file: "Q3 Report.pdf")) == "hello world q3 report pdf")
        #expect(MessageSearch.words(of: message("Hello", deleted: true)) == "")
        #expect(MessageSearch.hasFile(message("x", file: "a.png")) && !MessageSearch.hasFile(message("x")))
    }

    @Test func aQueryIsWordsPhrasesAndATypedPrefix() throws {
        // Words as typed: each engine folds them as it folded the messages.
        #expect(
            try SearchQuery.parse("Café \"next Monday\" repo").terms
                == [.word("Café", prefix: false), .phrase(["next", "Monday"]), .word("repo", prefix: true)]
        )
        #expect(try SearchQuery.parse("report ").terms == [.word("report", prefix: false)])
        #expect(try SearchQuery.parse("\"report\"").terms == [.word("report", prefix: false)])
        #expect(try SearchQuery.parse("a").terms == [.word("a", prefix: false)], "one letter is never a prefix")
        #expect(try SearchQuery.parse("\"open phrase").terms == [.phrase(["open", "phrase"])])
        #expect(try SearchQuery.parse(" \"\" () * ").terms.isEmpty)
        #expect(throws: DomainError.self) { try SearchQuery.parse(String(repeating: "é", count: 257)) }
        #expect(throws: DomainError.self) { try SearchQuery.parse((1...17).map { "w\($0)" }.joined(separator: " ")) }
        #expect(try SearchQuery.parse((1...16).map { "w\($0)" }.joined(separator: " ")).terms.count == 16)
    }

    @Test func theEnginesGetQuotedTermsOnly() throws {
        let query = try SearchQuery.parse("OR NOT \"near x\" col:umn Té")
        #expect(query.fts5Expression == "\"OR\" AND \"NOT\" AND \"near x\" AND \"col\" AND \"umn\" AND \"Té\"*")
        #expect(query.tsqueryText == "'or' & 'not' & ('near' <-> 'x') & 'col' & 'umn' & 'te':*")
        // Nothing a tokenizer keeps can close a quote.
        #expect(MessageSearch.tokens("a\"b'c\\d").allSatisfy { !$0.contains("\"") && !$0.contains("'") })
    }

    @Test func aSnippetShowsTheFirstMatchWithEveryMatchMarked() throws {
        let query = try SearchQuery.parse("cafe repo")
        let short = try #require(MessageSearch.snippet(of: message("Le Café: the report's ready"), for: query))
        #expect(short.text == "Le Café: the report's ready")
        #expect(short.matches == [TextRange(start: 3, length: 4), TextRange(start: 13, length: 6)])

        // Long text: cut around the first match, at a word's beginning, with the cuts marked.
        let long =
            String(repeating: "filler words here ", count: 10) + "the report 👍🏽 is here "
            + String(
                repeating: "tail ", count: 60)
        let snippet = try #require(MessageSearch.snippet(of: message(long), for: query))
        #expect(snippet.text.hasPrefix("…") && snippet.text.hasSuffix("…"))
        #expect(snippet.text.count <= MessageSearch.snippetCharacters + 2)
        let utf16 = Array(snippet.text.utf16)
        for range in snippet.matches {
            let marked = String(decoding: utf16[range.start..<range.start + range.length], as: UTF16.self)
            #expect(marked == "report")
        }
        #expect(snippet.matches.count == 1)
        #expect(!snippet.text.dropFirst().hasPrefix(" ") && snippet.text.contains("filler"))

        // Found by a file's name: the beginning of the text, nothing marked; no text, no snippet.
        let byFile = try #require(MessageSearch.snippet(of: message("see attached", file: "cafe.png"), for: query))
        #expect(byFile.text == "see attached" && byFile.matches.isEmpty)
        #expect(MessageSearch.snippet(of: message("", file: "cafe.png"), for: query) == nil)
    }
}

extension MessageSearchTests {
    @Test func relevancePagesStopAtTheirDepthAndCursorsKeepToTheirOrder() throws {
        func request(_ order: MessageSearchOrder, _ cursor: String?) -> MessageSearchRequest {
            MessageSearchRequest(
                appId: "a", viewer: nil, query: SearchQuery(terms: []), order: order, cursor: cursor, limit: 20
            )
        }
        let deep = try SearchPagePlan(request(.relevance, "r990"), positionFields: 1)
        #expect(deep.offset == 990 && deep.limit == 10 && deep.before == nil)
        #expect(deep.nextCursor(rows: 10, last: nil) == nil)
        let first = try SearchPagePlan(request(.relevance, nil), positionFields: 1)
        #expect(first.nextCursor(rows: 20, last: nil) == "r20" && first.nextCursor(rows: 19, last: nil) == nil)
        let newest = try SearchPagePlan(request(.newest, "p1.2.3"), positionFields: 3)
        #expect(newest.before == [1, 2, 3] && newest.offset == 0 && newest.limit == 20)
        #expect(newest.nextCursor(rows: 20, last: [4, 5, 6]) == "p4.5.6")
        for (cursor, order, fields) in [
            ("p1.2", MessageSearchOrder.newest, 3), ("r20", .newest, 1), ("p9", .relevance, 1),
            ("r0", .relevance, 1), ("p1.x", .newest, 2), ("", .newest, 1),
        ] {
            #expect(throws: DomainError.self) { try SearchPagePlan(request(order, cursor), positionFields: fields) }
        }
    }
}
