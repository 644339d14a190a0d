import ParleyServer

extension FuzzTarget {
    /// The server's UTF-8 validation of text frames and close reasons (`UTF8Validation`, 8 bytes at a time for
    /// ASCII) against the standard library's validating decoder, at every alignment of the first 8 bytes.
    static let utf8 = FuzzTarget(
        name: "utf8",
        summary: "UTF8Validation.isValid against String(validating:as:) at 8 offsets"
    ) { bytes throws(FuzzFinding) in
        for offset in 0..<min(8, bytes.count + 1) {
            let slice = UnsafeRawBufferPointer(rebasing: bytes[offset...])
            let expected = String(validating: slice, as: UTF8.self) != nil
            let found = UTF8Validation.isValid(slice)
            guard found == expected else {
                throw FuzzFinding("isValid says \(found), the standard library \(expected), for \(Array(slice))")
            }
        }
    }
}
