import Testing

@testable import ParleyServer

/// Random ids and tokens: the alphabet, the length, and no repeats (the buffered random source hands out each byte
/// once, across refills).
@Suite struct SecretsTests {
    @Test func idsHaveTheirPrefixLengthAndAlphabetAndDoNotRepeat() {
        var seen = Set<String>()
        // 20,000 ids of 20 characters use far more than one 4 KiB block of random bytes.
        for _ in 0..<20_000 {
            let id = Secrets.randomID(prefix: "m_")
            #expect(id.hasPrefix("m_") && id.count == 22)
            #expect(id.dropFirst(2).allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) })
            seen.insert(id)
        }
        #expect(seen.count == 20_000)
    }

    @Test func messageIdsSortByTheTimeTheyWereMadeAt() {
        // Milliseconds from 1970 to past 2100, each id against one made a millisecond later and one made at the same
        // millisecond.
        let times: [Int64] = [
            0, 1, 35, 36, 1_700_000_000_000, 1_700_000_000_001, 4_102_444_800_000, 99_999_999_999_999,
        ]
        for time in times {
            let id = Secrets.messageID(at: time)
            #expect(id.hasPrefix("m_") && id.count == 22)
            #expect(id.dropFirst(2).allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) })
            #expect(id < Secrets.messageID(at: time + 1))
            #expect(id.prefix(11) == Secrets.messageID(at: time).prefix(11))
            #expect(id != Secrets.messageID(at: time))
        }
        // A time before 1970 (a clock set wrong) is made at 1970, not refused.
        #expect(Secrets.messageID(at: -5).hasPrefix("m_000000000"))
        let sorted = (0..<1_000).map { Secrets.messageID(at: 1_700_000_000_000 + Int64($0) * 997) }
        #expect(sorted == sorted.sorted())
    }

    @Test func everyCharacterOfTheAlphabetIsUsedEvenly() {
        var counts: [Character: Int] = [:]
        for _ in 0..<2_000 {
            for character in Secrets.randomID(prefix: "", length: 36) { counts[character, default: 0] += 1 }
        }
        // 72,000 draws over 36 characters: 2,000 each on average; a biased draw (byte % 36 without rejection) would
        // still pass this, but a broken one (a constant, a short alphabet) would not.
        #expect(counts.count == 36)
        #expect(counts.values.allSatisfy { (1_700...2_300).contains($0) })
    }

    @Test func tokensAre32RandomBytesInHex() {
        let token = Secrets.newAuthToken()
        #expect(token.hasPrefix("pt_") && token.count == 3 + 64)
        #expect(token.dropFirst(3).allSatisfy { $0.isHexDigit })
        #expect(Secrets.newAuthToken() != token)
    }
}
