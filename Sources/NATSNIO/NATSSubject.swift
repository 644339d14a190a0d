/// Subject validation: fast, one pass over the UTF-8 bytes.
enum NATSSubject {
    /// Checks a subject for PUB (and reply subjects): non-empty tokens, no whitespace, no wildcard token.
    static func validatePublish(_ subject: String) throws(NATSError) {
        try self.validate(subject, wildcards: false, what: "subject")
    }

    /// Checks a subject for SUB: non-empty tokens, no whitespace; `*` tokens anywhere, `>` only as the last token.
    static func validateSubscribe(_ subject: String) throws(NATSError) {
        try self.validate(subject, wildcards: true, what: "subject")
    }

    /// Checks a queue group name: non-empty, no whitespace.
    static func validateQueueGroup(_ group: String) throws(NATSError) {
        guard !group.isEmpty, group.utf8.allSatisfy({ !Self.isWhitespace($0) }) else {
            throw NATSError(.invalidSubject, "invalid queue group '\(group)'")
        }
    }

    @inline(__always)
    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A || byte == 0x0C || byte == 0x0B || byte == 0
    }

    private static func validate(_ subject: String, wildcards: Bool, what: String) throws(NATSError) {
        var tokenLength = 0
        var tokenIsStar = false
        var tokenIsGreater = false
        var valid = !subject.isEmpty
        if valid {
            for byte in subject.utf8 {
                if byte == UInt8(ascii: ".") {
                    if tokenLength == 0 || (!wildcards && (tokenIsStar || tokenIsGreater)) || tokenIsGreater {
                        valid = false
                        break
                    }
                    tokenLength = 0
                    tokenIsStar = false
                    tokenIsGreater = false
                    continue
                }
                if Self.isWhitespace(byte) {
                    valid = false
                    break
                }
                tokenLength += 1
                tokenIsStar = tokenLength == 1 && byte == UInt8(ascii: "*")
                tokenIsGreater = tokenLength == 1 && byte == UInt8(ascii: ">")
            }
            if valid {
                if tokenLength == 0 {
                    valid = false
                } else if tokenIsStar || tokenIsGreater {
                    valid = wildcards
                }
            }
        }
        guard valid else {
            let reason = wildcards ? "" : " (wildcards are not allowed in a publish subject)"
            throw NATSError(.invalidSubject, "invalid \(what) '\(subject)'\(reason)")
        }
    }
}
