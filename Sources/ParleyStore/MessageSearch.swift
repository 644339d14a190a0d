import Foundation
import ParleyProtocol

/// Message search: how a query is read, how PostgreSQL's words are folded, the pages of results and the snippet
/// shown with one. Pure. SQLite's FTS5 reads a message's text itself (the view `message_text`) and folds it with its
/// own tokenizer; PostgreSQL gets the words this computes (``words(of:)``).
///
/// A message's **words** are the letters and digits of its text parts and of its files' names, lowercased, with
/// diacritics removed (`é` finds `e` and `e` finds `é`), split wherever something else stands between them. A script
/// written without spaces (Chinese, Japanese, Thai) is one word per run of characters. A deleted message has no words.
public enum MessageSearch {
    /// Most characters in a query.
    public static let maxQueryCharacters = 256
    /// Most words (or quoted phrases) in a query.
    public static let maxTerms = 16
    /// The shortest last word read as a prefix (`mee` finds `meeting`); a shorter one must match whole.
    public static let minPrefixCharacters = 2
    /// Longest word kept, in characters; a longer run of letters is cut (and found by its beginning).
    public static let maxWordCharacters = 64
    /// Most results a relevance-ordered search pages through.
    public static let maxRelevanceResults = 1_000

    // MARK: Words

    /// The words a message is found by, joined by spaces; empty when it has none (deleted, or only data parts).
    public static func words(of message: Message) -> String {
        guard !message.isDeleted else { return "" }
        var text: [String] = []
        for part in message.parts {
            if let value = part.text { text.append(value) }
            if let name = part.file?.name { text.append(name) }
        }
        return tokens(text.joined(separator: "\n")).joined(separator: " ")
    }

    /// Whether a message has a file part (the `hasFile` filter).
    public static func hasFile(_ message: Message) -> Bool {
        !message.isDeleted && message.parts.contains { $0.file != nil }
    }

    /// `text` folded and split into words (see ``MessageSearch``).
    public static func tokens(_ text: String) -> [String] {
        guard text.utf8.allSatisfy({ $0 < 0x80 }) else { return wordRanges(in: text).map { fold(text[$0]) } }
        // ASCII (most messages): runs of letters and digits, lowercased, from the bytes.
        var words: [String] = []
        var word: [UInt8] = []
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                if word.count < maxWordCharacters { word.append(byte) }
            case UInt8(ascii: "A")...UInt8(ascii: "Z"):
                if word.count < maxWordCharacters { word.append(byte + 32) }
            default:
                if !word.isEmpty {
                    words.append(String(decoding: word, as: UTF8.self))
                    word.removeAll(keepingCapacity: true)
                }
            }
        }
        if !word.isEmpty { words.append(String(decoding: word, as: UTF8.self)) }
        return words
    }

    /// `text` lowercased, without diacritics (combining marks after canonical decomposition).
    public static func fold(_ text: Substring) -> String {
        if text.utf8.allSatisfy({ $0 < 0x80 }) { return String(text.lowercased().prefix(maxWordCharacters)) }
        var folded = String.UnicodeScalarView()
        for scalar in String(text).decomposedStringWithCanonicalMapping.unicodeScalars
        where scalar.properties.generalCategory != .nonspacingMark {
            folded.append(scalar)
        }
        return String(String(folded).lowercased().prefix(maxWordCharacters))
    }

    /// The ranges of `text`'s words: runs of letters, digits and the marks that belong to them.
    static func wordRanges(in text: String) -> [Range<String.Index>] {
        var ranges: [Range<String.Index>] = []
        var start: String.Index?
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(after: index)
            if isWordCharacter(text[index]) {
                if start == nil { start = index }
            } else if let begun = start {
                ranges.append(begun..<index)
                start = nil
            }
            index = next
        }
        if let begun = start { ranges.append(begun..<text.endIndex) }
        return ranges
    }

    private static func isWordCharacter(_ character: Character) -> Bool {
        guard let first = character.unicodeScalars.first else { return false }
        return first.properties.isAlphabetic || first.properties.numericType != nil
    }

    // MARK: Snippets

    /// Characters of text a snippet shows at most.
    public static let snippetCharacters = 160
    /// Characters shown before the first match, when the text is longer than a snippet.
    public static let snippetLead = 40

    /// The part of `message`'s text that shows why it was found: up to ``snippetCharacters`` around the first word
    /// that matches, with every matching word marked (UTF-16 offsets into the snippet's text). A message whose text
    /// has no matching word (it was found by a file's name) shows the beginning of its text; nil when it has no text.
    public static func snippet(of message: Message, for query: SearchQuery) -> SearchSnippet? {
        let text = message.parts.compactMap(\.text).joined(separator: "\n")
        guard !text.isEmpty else { return nil }
        let words = wordRanges(in: text)
        let matches = query.matcher()
        let matching = words.filter { matches(fold(text[$0])) }
        var lower = text.startIndex
        if let first = matching.first {
            lower = text.index(first.lowerBound, offsetBy: -snippetLead, limitedBy: text.startIndex) ?? text.startIndex
            // Start at a word's beginning.
            if lower > text.startIndex, let word = words.first(where: { $0.upperBound > lower }) {
                lower = min(word.lowerBound, first.lowerBound)
            }
        }
        let upper = text.index(lower, offsetBy: snippetCharacters, limitedBy: text.endIndex) ?? text.endIndex
        let prefix = lower > text.startIndex ? "…" : ""
        let suffix = upper < text.endIndex ? "…" : ""
        let shown = prefix + text[lower..<upper] + suffix
        let base = text.utf16.distance(from: text.startIndex, to: lower) - prefix.utf16.count
        let marks = matching.filter { $0.lowerBound >= lower && $0.upperBound <= upper }.map { range in
            TextRange(
                start: text.utf16.distance(from: text.startIndex, to: range.lowerBound) - base,
                length: text.utf16.distance(from: range.lowerBound, to: range.upperBound)
            )
        }
        return SearchSnippet(text: shown, matches: marks)
    }
}

/// A search query as read from what a user typed: words that must all be found, quoted phrases whose words must be
/// found in that order, and a last word found by its beginning (search as you type). Operators of the engines (`OR`,
/// `NOT`, `*`, `:`, `-`, parentheses) are not operators here: they are words, or what separates words. Words are kept
/// as typed: each engine folds them as it folds the messages it indexed (SQLite's FTS5 tokenizer; ``MessageSearch/fold(_:)``
/// for PostgreSQL).
public struct SearchQuery: Sendable, Hashable {
    /// One thing the query asks for.
    public enum Term: Sendable, Hashable {
        /// A word; `prefix`: found by its beginning.
        case word(String, prefix: Bool)
        /// Words found one after another.
        case phrase([String])
    }

    public var terms: [Term]

    public init(terms: [Term]) { self.terms = terms }

    /// Reads `text`; throws `ERR_FIELD_TOO_LARGE` over ``MessageSearch/maxQueryCharacters`` or
    /// ``MessageSearch/maxTerms``. A query without words reads as no terms.
    public static func parse(_ text: String) throws -> SearchQuery {
        guard text.count <= MessageSearch.maxQueryCharacters else {
            throw DomainError(
                .fieldTooLarge, "A search is at most \(MessageSearch.maxQueryCharacters) characters."
            )
        }
        var terms: [Term] = []
        var quoted = false
        for (index, piece) in text.split(separator: "\"", omittingEmptySubsequences: false).enumerated() {
            quoted = index % 2 == 1
            let piece = String(piece)
            let words = MessageSearch.wordRanges(in: piece).map { String(piece[$0]) }.filter {
                !MessageSearch.fold($0[...]).isEmpty
            }
            if quoted {
                if words.count == 1 {
                    terms.append(.word(words[0], prefix: false))
                } else if !words.isEmpty {
                    terms.append(.phrase(words))
                }
            } else {
                terms += words.map { .word($0, prefix: false) }
            }
        }
        // The last word typed, not closed by a space or a quote, is read as a prefix.
        if !quoted, let last = terms.last, case .word(let word, _) = last,
            word.count >= MessageSearch.minPrefixCharacters, let end = text.unicodeScalars.last,
            !end.properties.isWhitespace, end != "\""
        {
            terms[terms.count - 1] = .word(word, prefix: true)
        }
        guard terms.count <= MessageSearch.maxTerms else {
            throw DomainError(.fieldTooLarge, "A search has at most \(MessageSearch.maxTerms) words.")
        }
        return SearchQuery(terms: terms)
    }

    /// Whether a folded word of a message (``MessageSearch/fold(_:)``) is one the query looks for; the query's words
    /// are folded once, for every word asked about.
    public func matcher() -> @Sendable (String) -> Bool {
        var whole = Set<String>()
        var prefixes: [String] = []
        for term in terms {
            switch term {
            case .word(let word, true): prefixes.append(MessageSearch.fold(word[...]))
            case .word(let word, false): whole.insert(MessageSearch.fold(word[...]))
            case .phrase(let words): whole.formUnion(words.map { MessageSearch.fold($0[...]) })
            }
        }
        return { [whole, prefixes] word in whole.contains(word) || prefixes.contains { word.hasPrefix($0) } }
    }

    /// The query as an SQLite FTS5 expression over the column `words`: every term quoted (so nothing in it is an
    /// operator; FTS5's tokenizer folds it), all of them required.
    public var fts5Expression: String {
        terms.map { term in
            switch term {
            case .word(let word, let prefix): return Self.fts5String(word) + (prefix ? "*" : "")
            case .phrase(let words): return Self.fts5String(words.joined(separator: " "))
            }
        }.joined(separator: " AND ")
    }

    /// The query as PostgreSQL `tsquery` text, for `to_tsquery('simple', ...)`: folded words as quoted lexemes joined
    /// by `&`, phrases by `<->`, the prefix as `:*`.
    public var tsqueryText: String {
        terms.map { term in
            switch term {
            case .word(let word, let prefix): return Self.tsLexeme(word) + (prefix ? ":*" : "")
            case .phrase(let words): return "(" + words.map(Self.tsLexeme).joined(separator: " <-> ") + ")"
            }
        }.joined(separator: " & ")
    }

    private static func fts5String(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    private static func tsLexeme(_ word: String) -> String {
        let folded = MessageSearch.fold(word[...])
        return "'" + folded.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "''")
            + "'"
    }
}

extension MessageSearch {
    /// How long one search may take (a store stops it then): a search for a word half of a large app's messages hold,
    /// in the whole app, sorts every match on PostgreSQL (0.7 s at 1,000,000 messages, docs/BENCHMARKS.md), and grows
    /// with the app.
    public static let timeLimit = Duration.seconds(3)

    /// The answer to a search that took longer than `limit`: `ERR_SEARCH_TIMEOUT`.
    public static func timedOut(_ limit: Duration) -> DomainError {
        let milliseconds = limit.components.seconds * 1_000 + limit.components.attoseconds / 1_000_000_000_000_000
        let shown = milliseconds >= 1_000 ? "\(milliseconds / 1_000) s" : "\(milliseconds) ms"
        return DomainError(
            .searchTimeout,
            "The search took longer than \(shown): narrow it (a conversation, a sender, dates, more words)."
        )
    }
}

/// A search over messages, as a store runs it.
public struct MessageSearchRequest: Sendable, Hashable {
    public var appId: String
    /// Whose messages: those of the conversations `viewer` participates in, without the messages of users they block.
    /// Nil: the whole app (its server).
    public var viewer: String?
    public var query: SearchQuery
    public var conversationId: String?
    public var sender: String?
    /// Only messages with a file part.
    public var hasFile: Bool
    /// Only messages sent before (exclusive) / at or after this time (epoch ms).
    public var sentBefore: Int64?
    public var sentAfter: Int64?
    public var order: MessageSearchOrder
    /// Where the previous page ended (``MessageSearchPage/nextCursor``), nil for the first page.
    public var cursor: String?
    public var limit: Int
    /// How long the store may search before it gives up with ``MessageSearch/timedOut(_:)``.
    public var timeLimit: Duration

    public init(
        appId: String, viewer: String?, query: SearchQuery, conversationId: String? = nil, sender: String? = nil,
        hasFile: Bool = false, sentBefore: Int64? = nil, sentAfter: Int64? = nil, order: MessageSearchOrder = .newest,
        cursor: String? = nil, limit: Int, timeLimit: Duration = MessageSearch.timeLimit
    ) {
        self.timeLimit = timeLimit
        self.appId = appId
        self.viewer = viewer
        self.query = query
        self.conversationId = conversationId
        self.sender = sender
        self.hasFile = hasFile
        self.sentBefore = sentBefore
        self.sentAfter = sentAfter
        self.order = order
        self.cursor = cursor
        self.limit = limit
    }
}

/// A page of messages found, and the cursor of the next page (nil on the last).
public struct MessageSearchPage: Sendable, Hashable {
    public var messages: [Message]
    public var nextCursor: String?

    public init(messages: [Message], nextCursor: String?) {
        self.messages = messages
        self.nextCursor = nextCursor
    }
}

/// One page of a search as a store runs it, decided from the request once: where it starts, how many rows it asks,
/// and the cursor after it.
public struct SearchPagePlan: Sendable, Hashable {
    /// Newest first: only results before this position (the store's own, ``SearchCursor/position(_:)``).
    public var before: [Int64]?
    /// Relevance: the results skipped.
    public var offset: Int
    /// The rows to ask for (relevance never pages past ``MessageSearch/maxRelevanceResults``).
    public var limit: Int
    private let order: MessageSearchOrder
    private let pageSize: Int

    /// Reads the request's cursor (a position of `positionFields` numbers); throws `ERR_BAD_REQUEST` for a cursor that
    /// is not one of this order's.
    public init(_ request: MessageSearchRequest, positionFields: Int) throws {
        order = request.order
        pageSize = request.limit
        switch try request.cursor.map({ try SearchCursor.parse($0, order: request.order, fields: positionFields) }) {
        case .position(let values): (before, offset) = (values, 0)
        case .offset(let count): (before, offset) = (nil, count)
        case nil: (before, offset) = (nil, 0)
        }
        limit = order == .relevance ? min(pageSize, MessageSearch.maxRelevanceResults - offset) : pageSize
    }

    /// The cursor of the next page, after a page of `rows` rows the last of which is at `last`; nil on the last page.
    public func nextCursor(rows: Int, last: [Int64]?) -> String? {
        guard rows == pageSize else { return nil }
        switch order {
        case .newest: return last.map { SearchCursor.position($0).string }
        case .relevance:
            let shown = offset + rows
            return shown < MessageSearch.maxRelevanceResults ? SearchCursor.offset(shown).string : nil
        }
    }
}

/// Where a page of search results ended: the store's own position (newest first) or how many results were shown
/// (relevance). Written into an opaque cursor string; a cursor of the other order, or not one of ours, is refused.
public enum SearchCursor: Sendable, Hashable {
    /// After the result at this position (SQLite: the log position; PostgreSQL: sent time, conversation, seq).
    case position([Int64])
    /// After this many results.
    case offset(Int)

    public var string: String {
        switch self {
        case .position(let values): return "p" + values.map(String.init).joined(separator: ".")
        case .offset(let count): return "r\(count)"
        }
    }

    /// Reads a cursor for `order`, with `fields` numbers in a position; throws `ERR_BAD_REQUEST` otherwise.
    public static func parse(_ text: String, order: MessageSearchOrder, fields: Int) throws -> SearchCursor {
        let invalid = DomainError(.badRequest, "Invalid cursor.")
        switch (order, text.first) {
        case (.newest, "p"):
            let values = text.dropFirst().split(separator: ".", omittingEmptySubsequences: false).map { Int64($0) }
            guard values.count == fields, values.allSatisfy({ $0 != nil }) else { throw invalid }
            return .position(values.map { $0! })
        case (.relevance, "r"):
            guard let count = Int(text.dropFirst()), count > 0, count < MessageSearch.maxRelevanceResults else {
                throw invalid
            }
            return .offset(count)
        default: throw invalid
        }
    }
}
