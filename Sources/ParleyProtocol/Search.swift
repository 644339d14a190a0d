/// How search results are ordered (`order` of `GET /v1/search/messages`).
public enum MessageSearchOrder: String, Codable, Sendable, Hashable {
    /// Newest first (the default).
    case newest
    /// Best match first (the engine's ranking: BM25 on SQLite, `ts_rank` on PostgreSQL), newest first among equals; at
    /// most 1,000 results deep.
    case relevance
}

/// A range of a text, in UTF-16 code units (what JavaScript strings and `NSRange` count).
public struct TextRange: Codable, Sendable, Hashable {
    /// Where the range begins.
    public var start: Int
    /// How many UTF-16 code units it covers.
    public var length: Int
    /// Creates a range.
    public init(start: Int, length: Int) {
        self.start = start
        self.length = length
    }
}

/// The part of a found message's text that shows why it was found, with the matching words marked.
public struct SearchSnippet: Codable, Sendable, Hashable {
    /// Up to 160 characters of the message's text; `…` marks where it was cut.
    public var text: String
    /// The words of `text` that match the search.
    public var matches: [TextRange]
    /// Creates a snippet.
    public init(text: String, matches: [TextRange]) {
        self.text = text
        self.matches = matches
    }
}

/// One message found by a search.
public struct MessageSearchResult: Codable, Sendable, Hashable {
    /// The message as it is now (as events carry it: without `replyCount`, `lastReplyAt` and `reactions`).
    public var message: Message
    /// Why it was found; absent when the message has no text (it was found by a file's name).
    public var snippet: SearchSnippet?
    /// Creates a result.
    public init(message: Message, snippet: SearchSnippet?) {
        self.message = message
        self.snippet = snippet
    }
}

/// `GET /v1/search/messages`: a page of messages found.
public struct MessageSearchResults: Codable, Sendable, Hashable {
    /// The results, in the order asked for (newest first, or best match first).
    public var results: [MessageSearchResult]
    /// Pass as `cursor` to get the next page; nil when there is nothing more.
    public var nextCursor: String?
    /// Creates a page of results.
    public init(results: [MessageSearchResult], nextCursor: String? = nil) {
        self.results = results
        self.nextCursor = nextCursor
    }
}

/// Whom an app's users find by searching for users (`GET /v1/search/users`); the app's server finds every user.
public enum UserDirectoryVisibility: String, Codable, Sendable, Hashable, CaseIterable {
    /// Every user of the app (the default).
    case everyone
    /// Only the users who share a (not deleted) conversation with the searcher.
    case contacts
}
