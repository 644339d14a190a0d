import ParleyProtocol
import ParleyStore
import Testing

/// ``UserExport/Walk``, the walk every store runs for an export's page: over a made-up log where the user sent every
/// third event, every page is bounded, and the pages together hold each of the user's messages once, in order.
@Suite struct UserExportTests {
    /// Conversation pk -> its events (seq 1...count); the user's are those with seq divisible by 3.
    let log: [Int64: Int] = [2: 10, 5: 0, 7: 31, 9: 4]

    func message(_ pk: Int64, _ seq: Int64) -> Message {
        Message(id: "m_\(pk)_\(seq)", conversationId: "c_\(pk)", seq: seq, sender: "alice", parts: [], sentAt: seq)
    }

    func read(_ read: UserExport.Walk.Read) -> [UserExport.Scanned] {
        let count = Int64(log[read.conversationPK] ?? 0)
        guard read.afterSeq < count else { return [] }
        return (read.afterSeq + 1...count).prefix(read.budget).map { seq in
            UserExport.Scanned(
                position: UserExport.Position(conversationPK: read.conversationPK, seq: seq),
                message: seq % 3 == 0 ? message(read.conversationPK, seq) : nil
            )
        }
    }

    func page(after: UserExport.Position?, limit: Int, scan: Int) -> (UserExport.Page, reads: Int) {
        var walk = UserExport.Walk(conversations: [9, 2, 7, 5, 2], after: after, limit: limit, scan: scan)
        var reads = 0
        while let next = walk.next() {
            reads += 1
            #expect(reads < 100, "a walk that does not end")
            if reads >= 100 { break }
            walk.take(read(next))
        }
        return (walk.page, reads)
    }

    @Test(arguments: [(1, 1), (2, 5), (3, 7), (10, 5_000), (100, 3)])
    func pagesHoldEveryMessageOnceInOrder(limit: Int, scan: Int) {
        var expected: [String] = []
        for pk in log.keys.sorted() {
            for seq in stride(from: Int64(3), through: Int64(log[pk]!), by: 3) { expected.append("m_\(pk)_\(seq)") }
        }
        var found: [String] = []
        var after: UserExport.Position?
        var pages = 0
        repeat {
            let (page, _) = self.page(after: after, limit: limit, scan: scan)
            #expect(page.messages.count <= limit)
            found += page.messages.map(\.id)
            // The cursor goes forward, and through its string.
            if let next = page.next {
                #expect(after.map { $0 < next } ?? true)
                #expect(UserExport.Position(cursor: next.cursor) == next)
            }
            after = page.next
            pages += 1
        } while after != nil && pages < 1_000
        #expect(found == expected)
    }

    @Test func aPageReadsNoMoreThanItsScan() {
        var walk = UserExport.Walk(conversations: [7], after: nil, limit: 100, scan: 4)
        var read = 0
        while let next = walk.next() {
            let rows = self.read(next)
            read += rows.count
            walk.take(rows)
        }
        #expect(read == 4)
        #expect(walk.page.messages.map(\.id) == ["m_7_3"])
        #expect(walk.page.next == UserExport.Position(conversationPK: 7, seq: 4))
    }

    @Test func cursorsThatAreNotOnesAreRefused() {
        for cursor in [
            "", "x", "x1", "x1.", "x.1", "1.2", "x-1.2", "x1.-2", "x1.2.3", "xa.b", "x99999999999999999999.1",
        ] {
            #expect(UserExport.Position(cursor: cursor) == nil, "\(cursor)")
        }
        #expect(UserExport.Position(cursor: "x0.0") == UserExport.Position(conversationPK: 0, seq: 0))
    }
}
