import NIOConcurrencyHelpers
import ParleyProtocol
import Testing

@testable import ParleyServer

/// The ids of events that are not stored (typing, presence, unread counts).
@Suite struct EphemeralEventsTests {
    @Test func idsAreUniqueAcrossThreadsAndShapedAsBefore() async {
        let ids = NIOLockedValueBox<[String]>([])
        await withTaskGroup(of: [String].self) { group in
            for _ in 0..<4 {
                group.addTask { (0..<5_000).map { _ in EphemeralEvents.nextID() } }
            }
            for await batch in group { ids.withLockedValue { $0 += batch } }
        }
        let all = ids.withLockedValue { $0 }
        #expect(all.count == 20_000 && Set(all).count == 20_000)
        let alphabet = Set("0123456789abcdefghijklmnopqrstuvwxyz")
        #expect(
            all.allSatisfy { $0.count == 22 && $0.hasPrefix("e_") && $0.dropFirst(2).allSatisfy(alphabet.contains) })
    }

    @Test func anEventCarriesItsID() throws {
        let json = try #require(
            EphemeralEvents.json(
                appId: "a", actor: nil, timestamp: 1,
                payload: .unreadUpdated(UnreadSummary(total: 0, conversations: []))
            ))
        let text = String(decoding: json, as: UTF8.self)
        #expect(text.hasPrefix(#"{"id":"e_"#) && text.contains(#""name":"unread.update""#))
    }
}
