import NIOCore

extension ByteBuffer {
    /// Writes a non-negative integer in decimal without allocating.
    @inline(__always)
    mutating func writeDecimal(_ value: some BinaryInteger) {
        var remaining = UInt64(value)
        let count = remaining.decimalDigitCount
        self.reserveCapacity(minimumWritableBytes: count)
        var index = self.writerIndex + count
        repeat {
            index -= 1
            self.setInteger(UInt8(truncatingIfNeeded: remaining % 10) &+ UInt8(ascii: "0"), at: index)
            remaining /= 10
        } while index > self.writerIndex
        self.moveWriterIndex(forwardBy: count)
    }
}

extension UnsafeMutableRawBufferPointer {
    @inline(__always)
    func put(_ byte: UInt8, at index: inout Int) {
        self[index] = byte
        index += 1
    }

    @inline(__always)
    func put(_ string: String, at index: inout Int) {
        let start = index
        let copied: Int? = string.utf8.withContiguousStorageIfAvailable { source in
            UnsafeMutableRawBufferPointer(rebasing: self[start...]).copyMemory(from: UnsafeRawBufferPointer(source))
            return source.count
        }
        if let copied {
            index += copied
        } else {
            for byte in string.utf8 {
                self.put(byte, at: &index)
            }
        }
    }

    @inline(__always)
    func putDecimal(_ value: Int, digits: Int, at index: inout Int) {
        var remaining = value
        var position = index + digits
        repeat {
            position -= 1
            self[position] = UInt8(truncatingIfNeeded: remaining % 10) &+ UInt8(ascii: "0")
            remaining /= 10
        } while position > index
        index += digits
    }
}

extension BinaryInteger {
    /// The number of decimal digits of a non-negative value.
    var decimalDigitCount: Int {
        var count = 1
        var value = self
        while value >= 10 {
            value /= 10
            count += 1
        }
        return count
    }
}
