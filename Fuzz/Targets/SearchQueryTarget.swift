import ParleyProtocol
import ParleyStore

extension FuzzTarget {
    /// What a user types into search: the query parser (`SearchQuery.parse`), the snippet of a message found for it
    /// (its marks inside the snippet's text, never splitting a character) and the page cursor parser (a cursor read
    /// writes itself back as the same text).
    static let searchQuery = FuzzTarget(
        name: "search-query",
        summary: "SearchQuery.parse, snippets and SearchCursor.parse on any text: bounded, marks in place, round trips"
    ) { bytes throws(FuzzFinding) in
        var input = FuzzInput(bytes)
        let queryText = input.string(maxBytes: 300)
        let messageText = input.string(maxBytes: 600)
        let cursorText = input.string(maxBytes: 40)
        if let query = try? SearchQuery.parse(queryText) {
            guard query.terms.count <= MessageSearch.maxTerms, queryText.count <= MessageSearch.maxQueryCharacters
            else { throw FuzzFinding("\(queryText.debugDescription) read as \(query.terms.count) terms") }
            let message = Message(
                id: "m", conversationId: "c", seq: 1, sender: "u", parts: [.text(messageText)], sentAt: 0)
            if let snippet = MessageSearch.snippet(of: message, for: query) {
                let units = snippet.text.utf16
                for mark in snippet.matches {
                    guard mark.start >= 0, mark.length > 0, mark.start + mark.length <= units.count,
                        let start = units.index(units.startIndex, offsetBy: mark.start, limitedBy: units.endIndex),
                        let end = units.index(start, offsetBy: mark.length, limitedBy: units.endIndex),
                        start.samePosition(in: snippet.text.unicodeScalars) != nil,
                        end.samePosition(in: snippet.text.unicodeScalars) != nil
                    else {
                        throw FuzzFinding("mark \(mark) in snippet \(snippet.text.debugDescription)")
                    }
                }
            }
        }
        for order in [MessageSearchOrder.newest, .relevance] {
            guard let cursor = try? SearchCursor.parse(cursorText, order: order, fields: 3) else { continue }
            guard (try? SearchCursor.parse(cursor.string, order: order, fields: 3)) == cursor else {
                throw FuzzFinding("\(cursorText.debugDescription) read as \(cursor), written \(cursor.string)")
            }
        }
    }
}
