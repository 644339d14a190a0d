import ParleyProtocol

/// One user's data, read for an export (docs/PROTOCOL.md, "Exporting a user"): their profile, the conversations they
/// are in, and the messages they sent, page by page.
///
/// The messages are found by walking the conversations the user ever joined (their membership stream), each in
/// sequence order, and keeping the `sent` events whose actor is the user: no index on the sender is kept (it would
/// cost every message a B-tree leaf, issue 43), so an export scans those conversations once. Each page scans at most
/// ``scanPerPage`` events, so a request's work is bounded however few of them are the user's: a page may hold fewer
/// messages than asked, even none, with a cursor to go on.
public enum UserExport {
    /// Most events one page reads.
    public static let scanPerPage = 5_000

    /// Where a walk stands: the last event read (conversations by primary key, then events by sequence number).
    public struct Position: Sendable, Hashable, Comparable {
        public var conversationPK: Int64
        public var seq: Int64

        public init(conversationPK: Int64, seq: Int64) {
            self.conversationPK = conversationPK
            self.seq = seq
        }

        public static func < (lhs: Position, rhs: Position) -> Bool {
            (lhs.conversationPK, lhs.seq) < (rhs.conversationPK, rhs.seq)
        }

        /// The opaque cursor of a page that ends here.
        public var cursor: String { "x\(conversationPK).\(seq)" }

        /// A cursor read back; nil when it is not one of ``cursor``'s.
        public init?(cursor: String) {
            guard cursor.hasPrefix("x") else { return nil }
            let parts = cursor.dropFirst().split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 2, let pk = Int64(parts[0]), let seq = Int64(parts[1]), pk >= 0, seq >= 0 else {
                return nil
            }
            self.init(conversationPK: pk, seq: seq)
        }
    }

    /// One event a walk read: its place, and the message when it is one the user sent.
    public struct Scanned: Sendable {
        public var position: Position
        public var message: Message?

        public init(position: Position, message: Message?) {
            self.position = position
            self.message = message
        }
    }

    /// A page of the user's messages, and where the next one starts (nil: none is left).
    public struct Page: Sendable {
        public var messages: [Message]
        public var next: Position?

        public init(messages: [Message], next: Position?) {
            self.messages = messages
            self.next = next
        }
    }

    /// A page's walk over the conversations the user joined, as a machine the stores drive: ask ``next()`` what to
    /// read, read it, give it to ``take(_:)``, until ``next()`` says nothing; then ``page``. The one walk every store
    /// runs, whichever way it reads.
    public struct Walk: Sendable {
        /// What to read: at most `budget` events of the conversation `conversationPK` after `afterSeq`, in order.
        public struct Read: Sendable, Equatable {
            public var conversationPK: Int64
            public var afterSeq: Int64
            public var budget: Int
        }

        private let conversations: [Int64]
        private var index = 0
        private let after: Position?
        private let limit: Int
        private var budget: Int
        private var messages: [Message] = []
        private var last: Position?
        private var done = false

        /// A walk of `conversations` (primary keys, any order) after `after`, for at most `limit` messages and
        /// `scan` events.
        public init(conversations: [Int64], after: Position?, limit: Int, scan: Int = UserExport.scanPerPage) {
            self.conversations = Set(conversations).filter { $0 >= (after?.conversationPK ?? 0) }.sorted()
            self.after = after
            self.limit = limit
            self.last = after
            self.budget = max(scan, 1)
        }

        /// The next read, or nil when the page is complete.
        public func next() -> Read? {
            guard !done, index < conversations.count, budget > 0 else { return nil }
            let pk = conversations[index]
            return Read(conversationPK: pk, afterSeq: pk == after?.conversationPK ? after?.seq ?? 0 : 0, budget: budget)
        }

        /// The events ``next()``'s read found, in sequence order.
        public mutating func take(_ rows: [Scanned]) {
            guard let read = next() else { return }
            for row in rows.prefix(read.budget) {
                budget -= 1
                last = row.position
                if let message = row.message {
                    messages.append(message)
                    if messages.count == limit {
                        done = true
                        return
                    }
                }
            }
            // Fewer than asked: the conversation is read to its end.
            if rows.count < read.budget { index += 1 }
        }

        /// The messages found, and where the next page starts: nil once every conversation was read to its end.
        public var page: Page {
            Page(messages: messages, next: done || (index < conversations.count) ? last : nil)
        }
    }
}
