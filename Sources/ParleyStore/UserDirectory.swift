import Foundation
import ParleyProtocol

/// The user directory (`GET /v1/search/users`): the words a user is found by, how a search for users reads, and its
/// pages. Pure; both stores keep a user's words in a table of (app, word, uid) and run the same search over it.
///
/// A user's **words** are those of their name and of their uid, folded as message search folds them
/// (``MessageSearch/tokens(_:)``: lowercased, diacritics removed, split wherever something other than a letter or a
/// digit stands): `Zoë Adams` (uid `zoe_a@corp`) has the words `zoe`, `adams`, `a`, `corp`. A search finds the users
/// who have, for every word of the query, a word that begins with it: `zo ad` finds Zoë Adams, `adam` finds her and
/// Adam Smith. One query word **leads**: the one the fewest words of the app begin with (``lead(counts:)``), whose
/// range of the index is read in order; the others are checked on each user found. Results are ordered by the word
/// the leading one matched, then by uid, so that pages stay in one order while users are added (the cursor keeps the
/// leading word).
public enum UserDirectory {
    /// Most characters in a query.
    public static let maxQueryCharacters = 64
    /// Most words in a query.
    public static let maxQueryWords = 8

    /// The distinct words `name` and `uid` are found by, in order.
    public static func words(name: String, uid: String) -> [String] {
        Array(Set(MessageSearch.tokens(name) + MessageSearch.tokens(uid))).sorted()
    }

    /// The folded words of a query, longest first (the first leads among words as rare as it, ``lead(counts:)``). Throws
    /// `ERR_FIELD_TOO_LARGE` over ``maxQueryCharacters`` or ``maxQueryWords``, `ERR_BAD_REQUEST` without a letter or
    /// a digit.
    public static func prefixes(of query: String) throws -> [String] {
        guard query.count <= maxQueryCharacters else {
            throw DomainError(.fieldTooLarge, "A user search is at most \(maxQueryCharacters) characters.")
        }
        var prefixes: [String] = []
        for word in MessageSearch.tokens(query) where !prefixes.contains(word) { prefixes.append(word) }
        guard !prefixes.isEmpty else {
            throw DomainError(.badRequest, "Search for users by at least one letter or digit of a name or uid (`q`).")
        }
        guard prefixes.count <= maxQueryWords else {
            throw DomainError(.fieldTooLarge, "A user search has at most \(maxQueryWords) words.")
        }
        // Stable: equal lengths keep the order typed.
        return prefixes.enumerated().sorted { ($1.element.count, $0.offset) < ($0.element.count, $1.offset) }
            .map(\.element)
    }

    /// How many of a prefix's words a store counts, at most, to choose the leading word: past it, a word is common.
    public static let leadProbe = 1_000

    /// The leading word: the index of the fewest `counts` (each a prefix's words, at most ``leadProbe`` + 1), the
    /// first (longest) among equals.
    public static func lead(counts: [Int]) -> Int {
        counts.indices.min { (counts[$0], $0) < (counts[$1], $1) } ?? 0
    }

    /// The words that begin with `prefix` are those from `lower` (inclusive) to `upper` (exclusive), in the order of
    /// their UTF-8 bytes (SQLite's `BINARY`, PostgreSQL's `COLLATE "C"`): no character encodes above U+10FFFF.
    public static func range(of prefix: String) -> (lower: String, upper: String) {
        (prefix, prefix + "\u{10FFFF}")
    }
}

/// A search for users, as a store runs it.
public struct UserSearchRequest: Sendable, Hashable {
    public var appId: String
    /// The query's folded words, longest first (``UserDirectory/prefixes(of:)``).
    public var prefixes: [String]
    /// The index of the leading word in ``prefixes``.
    public var lead: Int
    /// Who searches: never found themself, nor the users they block or who block them, and with
    /// ``UserDirectoryVisibility/contacts`` only the users they share a conversation with. Nil: the app's server, who
    /// finds every user.
    public var viewer: String?
    public var visibility: UserDirectoryVisibility
    /// Where the previous page ended.
    public var after: UserSearchCursor?
    public var limit: Int

    public init(
        appId: String, prefixes: [String], lead: Int = 0, viewer: String?, visibility: UserDirectoryVisibility,
        after: UserSearchCursor? = nil, limit: Int
    ) {
        self.appId = appId
        self.prefixes = prefixes
        self.lead = lead
        self.viewer = viewer
        self.visibility = visibility
        self.after = after
        self.limit = limit
    }

    /// The word every result has a word beginning with, which orders them.
    public var leading: String { prefixes[lead] }
    /// The other words, checked on each result.
    public var others: [String] { prefixes.enumerated().filter { $0.offset != lead }.map(\.element) }
}

/// Where a page of users found ended: which query word led, the word that ordered the last user, and their uid. Opaque
/// to clients (`u` and the three in base64url).
public struct UserSearchCursor: Sendable, Hashable {
    public var lead: Int
    public var word: String
    public var uid: String

    public init(lead: Int = 0, word: String, uid: String) {
        self.lead = lead
        self.word = word
        self.uid = uid
    }

    public var string: String {
        "u"
            + Data("\(lead)\n\(word)\n\(uid)".utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    /// Reads a cursor; throws `ERR_BAD_REQUEST` for one that is not a user search's.
    public init(parsing text: String) throws {
        let invalid = DomainError(.badRequest, "Invalid cursor.")
        guard text.first == "u", text.utf8.count <= 512 else { throw invalid }
        var base64 = text.dropFirst().replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard let data = Data(base64Encoded: base64), let decoded = String(data: data, encoding: .utf8) else {
            throw invalid
        }
        let fields = decoded.split(separator: "\n", omittingEmptySubsequences: false)
        guard fields.count == 3, let lead = Int(fields[0]), (0..<UserDirectory.maxQueryWords).contains(lead),
            User.isValidUID(String(fields[2]))
        else { throw invalid }
        self.init(lead: lead, word: String(fields[1]), uid: String(fields[2]))
    }
}

/// A page of users found, and the cursor of the next page (nil on the last).
public struct UserSearchPage: Sendable, Hashable {
    public var users: [User]
    public var nextCursor: String?

    /// The page of `rows` (each user with the word that ordered it) for `request`.
    public init(rows: [(word: String, user: User)], request: UserSearchRequest) {
        users = rows.map(\.user)
        nextCursor =
            rows.count == request.limit
            ? rows.last.map { UserSearchCursor(lead: request.lead, word: $0.word, uid: $0.user.uid).string } : nil
    }
}
