import Foundation
import ParleyProtocol
import Testing

/// Client message ids made by the SDK: version-7 UUIDs, whose text sorts by the time they were made at.
@Suite struct TimeOrderedUUIDTests {
    @Test func theVersionVariantAndTimeAreWhereRFC9562PutsThem() {
        let milliseconds: Int64 = 1_700_000_000_123
        let uuid = TimeOrderedUUID.make(milliseconds: milliseconds)
        let text = uuid.uuidString
        #expect(text.count == 36)
        // xxxxxxxx-xxxx-7xxx-[89AB]xxx-xxxxxxxxxxxx, the first 12 hex digits the time.
        #expect(Array(text)[14] == "7")
        #expect("89AB".contains(Array(text)[19]))
        #expect(
            text.replacingOccurrences(of: "-", with: "").prefix(12)
                == String(milliseconds, radix: 16, uppercase: true).leftPadded(to: 12))
        #expect(TimeOrderedUUID.milliseconds(of: uuid) == milliseconds)
        #expect(TimeOrderedUUID.milliseconds(of: UUID(uuidString: "6F1C0A52-3C3E-4B8D-9C7A-2F4E5D6C7B8A")!) == nil)
    }

    @Test func idsMadeLaterSortAfterAndIdsMadeTogetherDiffer() {
        var earlier = TimeOrderedUUID.make(milliseconds: 0).uuidString
        for step in 1...2_000 {
            let time = Int64(step) * 1_234_567
            let later = TimeOrderedUUID.make(milliseconds: time).uuidString
            #expect(earlier < later)
            #expect(later != TimeOrderedUUID.make(milliseconds: time).uuidString)
            earlier = later
        }
    }

    @Test func aNegativeTimeIsZeroAndOneBeyondFortyEightBitsWraps() {
        #expect(TimeOrderedUUID.milliseconds(of: TimeOrderedUUID.make(milliseconds: -1)) == 0)
        #expect(TimeOrderedUUID.milliseconds(of: TimeOrderedUUID.make(milliseconds: 1 << 48 + 5)) == 5)
    }
}

extension String {
    fileprivate func leftPadded(to length: Int) -> String {
        String(repeating: "0", count: max(0, length - count)) + self
    }
}
