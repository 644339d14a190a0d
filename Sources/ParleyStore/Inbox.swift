import ParleyProtocol

/// A page of a user's inbox, as a store runs it.
public struct InboxRequest: Sendable, Hashable {
    public var appId: String
    public var uid: String
    public var filter: InboxFilter
    public var sort: InboxSort
    /// Where the previous page ended.
    public var after: InboxCursor?
    public var limit: Int

    public init(
        appId: String, uid: String, filter: InboxFilter = .init(), sort: InboxSort = .activity,
        after: InboxCursor? = nil, limit: Int
    ) {
        self.appId = appId
        self.uid = uid
        self.filter = filter
        self.sort = sort
        self.after = after
        self.limit = limit
    }
}

/// Where a page of the inbox ended, in its sort: whether the last conversation had unread messages (``InboxSort/unread``
/// only), its last activity and its key. The next page starts after it, so that a page never repeats a conversation
/// that kept its place; one that became active meanwhile moved before the cursor (its `message.new` tells the client).
public struct InboxCursor: Sendable, Hashable {
    public var hasUnread: Bool
    public var lastActivityAt: Int64
    public var conversationPK: Int64

    public init(hasUnread: Bool, lastActivityAt: Int64, conversationPK: Int64) {
        self.hasUnread = hasUnread
        self.lastActivityAt = lastActivityAt
        self.conversationPK = conversationPK
    }

    /// `a<activity>.<key>` (by activity) or `u<0|1>.<activity>.<key>` (unread first).
    public func string(for sort: InboxSort) -> String {
        switch sort {
        case .activity: return "a\(lastActivityAt).\(conversationPK)"
        case .unread: return "u\(hasUnread ? 1 : 0).\(lastActivityAt).\(conversationPK)"
        }
    }

    /// The SQL order of `sort` over columns `unread`, `last_activity_at` and `pk` (with `prefix`), both stores'.
    public static func orderSQL(_ sort: InboxSort) -> (_ prefix: String) -> String {
        { prefix in
            let activity = "\(prefix)last_activity_at DESC, \(prefix)pk DESC"
            return sort == .unread ? "\(prefix)unread > 0 DESC, " + activity : activity
        }
    }

    /// The SQL condition "after this cursor" in `sort`, each value written by `bind` (a placeholder), called in the
    /// order the values appear (SQLite's `?` are positional): (whether it has unread messages,) its last activity, its
    /// key.
    public func afterSQL(_ sort: InboxSort, bind: (InboxSQLValue) -> String) -> String {
        var columns = ["last_activity_at", "pk"]
        var values: [String] = []
        if sort == .unread {
            columns.insert("unread > 0", at: 0)
            values.append(bind(.bool(hasUnread)))
        }
        values.append(bind(.int(lastActivityAt)))
        values.append(bind(.int(conversationPK)))
        return "(\(columns.joined(separator: ", "))) < (\(values.joined(separator: ", ")))"
    }

    /// Reads a cursor of `sort`; throws `ERR_BAD_REQUEST` for one of another sort, or not one of ours.
    public init(parsing text: String, sort: InboxSort) throws {
        let invalid = DomainError(.badRequest, "Invalid cursor.")
        let fields = text.dropFirst().split(separator: ".", omittingEmptySubsequences: false).map { Int64($0) }
        guard fields.allSatisfy({ $0 != nil && $0! >= 0 }) else { throw invalid }
        let values = fields.map { $0! }
        switch (sort, text.first) {
        case (.activity, "a") where values.count == 2:
            self.init(hasUnread: false, lastActivityAt: values[0], conversationPK: values[1])
        case (.unread, "u") where values.count == 3 && values[0] <= 1:
            self.init(hasUnread: values[0] == 1, lastActivityAt: values[1], conversationPK: values[2])
        default: throw invalid
        }
    }
}

/// A value of an inbox statement's conditions, as a store binds it.
public enum InboxSQLValue: Sendable, Hashable {
    case bool(Bool)
    case int(Int64)
    case text(String)
}

/// One conversation of an inbox page as a store read it: the entry and its key (for the cursor).
public struct InboxRow: Sendable, Hashable {
    public var conversationPK: Int64
    public var entry: InboxEntry

    public init(conversationPK: Int64, entry: InboxEntry) {
        self.conversationPK = conversationPK
        self.entry = entry
    }
}

extension InboxRequest {
    /// The conditions a page's participations meet, over the columns both stores count (`id`, `archived`, `type`,
    /// `unread`, `unread_mentions`, `last_activity_at`, `pk`): the filter, then the cursor. Each value is written by `bind` (a
    /// placeholder), called in the order the values appear (SQLite's `?` are positional).
    public func conditionsSQL(bind: (InboxSQLValue) -> String) -> String {
        var conditions: [String] = []
        if let id = filter.conversationId {
            conditions.append("id = \(bind(.text(id)))")
        } else {
            conditions.append("archived = \(bind(.bool(filter.archived)))")
        }
        if let type = filter.type { conditions.append("type = \(bind(.text(type.rawValue)))") }
        if filter.unreadOnly { conditions.append("unread > 0") }
        if filter.mentionsOnly { conditions.append("unread_mentions > 0") }
        if let after { conditions.append(after.afterSQL(sort, bind: bind)) }
        return conditions.joined(separator: " AND ")
    }
}

extension InboxPage {
    /// The page of `rows` read for `request`, with the cursor after the last row when the page is full.
    public init(rows: [InboxRow], totalUnread: Int, request: InboxRequest) {
        let next = rows.count == request.limit ? rows.last : nil
        self.init(
            entries: rows.map(\.entry), totalUnread: totalUnread,
            nextCursor: next.map {
                InboxCursor(
                    hasUnread: $0.entry.unread > 0, lastActivityAt: $0.entry.lastActivityAt,
                    conversationPK: $0.conversationPK
                ).string(for: request.sort)
            }
        )
    }
}
