extension String {
    func trimmingASCIIWhitespace() -> Substring {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }
        guard let first = self.firstIndex(where: { !isSpace($0) }) else { return "" }
        let last = self.lastIndex(where: { !isSpace($0) })!
        return self[first...last]
    }

    func equalsIgnoringASCIICase(_ other: String) -> Bool {
        let lhs = self.utf8
        let rhs = other.utf8
        guard lhs.count == rhs.count else { return false }
        return zip(lhs, rhs).allSatisfy { a, b in
            a == b || (a | 0x20 == b | 0x20 && (a | 0x20) >= UInt8(ascii: "a") && (a | 0x20) <= UInt8(ascii: "z"))
        }
    }

    func replacingCRLF() -> String {
        var result = ""
        for character in self {
            switch character {
            case "\r\n": result += "\\r\\n"
            case "\r": result += "\\r"
            case "\n": result += "\\n"
            default: result.append(character)
            }
        }
        return result
    }
}
