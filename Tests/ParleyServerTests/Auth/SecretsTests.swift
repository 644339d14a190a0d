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
