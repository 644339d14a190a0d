import NIOCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Writes client operations (CONNECT, PUB, HPUB, SUB, UNSUB, PING, PONG) into a `ByteBuffer`.
enum NATSProtocolEncoder {
    /// The fields of CONNECT.
    struct ConnectOptions: Encodable, Equatable {
        var verbose = false
        var pedantic = false
        var tlsRequired = false
        var name: String?
        var lang = "swift"
        var version = NATSConnection.clientVersion
        var `protocol` = 1
        var echo: Bool
        var headers = true
        var noResponders = true
        var user: String?
        var pass: String?
        var authToken: String?

        enum CodingKeys: String, CodingKey {
            case verbose, pedantic, name, lang, version, `protocol`, echo, headers, user, pass
            case tlsRequired = "tls_required"
            case noResponders = "no_responders"
            case authToken = "auth_token"
        }

        init(configuration: NATSConfiguration, server: NATSServerAddress) {
            self.name = configuration.name
            self.echo = configuration.echo
            self.user = server.user
            self.pass = server.password
            self.authToken = server.token
        }
    }

    /// `CONNECT {json}\r\n`.
    static func writeConnect(_ options: ConnectOptions, into buffer: inout ByteBuffer) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Encoding a struct of strings, bools and ints cannot fail.
        let json = (try? encoder.encode(options)) ?? Data("{}".utf8)
        buffer.writeStaticString("CONNECT ")
        buffer.writeBytes(json)
        buffer.writeStaticString("\r\n")
    }

    /// `PUB subject [reply] size\r\npayload\r\n` or `HPUB subject [reply] hsize tsize\r\nheaders payload\r\n`.
    /// The caller has validated the subjects and headers. The control line is written in one pass.
    @inline(__always)
    static func writePublish(
        subject: String, replyTo: String?, headers: NATSHeaders?, headerLength: Int, payload: ByteBuffer,
        into buffer: inout ByteBuffer
    ) {
        let totalLength = headerLength + payload.readableBytes
        let totalDigits = totalLength.decimalDigitCount
        var lineLength = subject.utf8.count + 1 + totalDigits + 2
        if let replyTo {
            lineLength += replyTo.utf8.count + 1
        }
        let headerDigits = headerLength.decimalDigitCount
        if headers != nil {
            lineLength += 5 + headerDigits + 1
        } else {
            lineLength += 4
        }
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: lineLength) { out in
            var index = 0
            if headers != nil {
                out.put(UInt8(ascii: "H"), at: &index)
            }
            out.put(UInt8(ascii: "P"), at: &index)
            out.put(UInt8(ascii: "U"), at: &index)
            out.put(UInt8(ascii: "B"), at: &index)
            out.put(UInt8(ascii: " "), at: &index)
            out.put(subject, at: &index)
            out.put(UInt8(ascii: " "), at: &index)
            if let replyTo {
                out.put(replyTo, at: &index)
                out.put(UInt8(ascii: " "), at: &index)
            }
            if headers != nil {
                out.putDecimal(headerLength, digits: headerDigits, at: &index)
                out.put(UInt8(ascii: " "), at: &index)
            }
            out.putDecimal(totalLength, digits: totalDigits, at: &index)
            out.put(UInt8(ascii: "\r"), at: &index)
            out.put(UInt8(ascii: "\n"), at: &index)
            return index
        }
        headers?.write(into: &buffer)
        buffer.writeImmutableBuffer(payload)
        buffer.writeInteger(UInt16(0x0D0A))
    }

    /// `SUB subject [queue] sid\r\n`.
    static func writeSubscribe(_ subscription: NATSSubscription, into buffer: inout ByteBuffer) {
        buffer.writeStaticString("SUB ")
        buffer.writeString(subscription.subject)
        buffer.writeInteger(UInt8(ascii: " "))
        if let group = subscription.queueGroup {
            buffer.writeString(group)
            buffer.writeInteger(UInt8(ascii: " "))
        }
        buffer.writeDecimal(subscription.sid)
        buffer.writeStaticString("\r\n")
    }

    /// `UNSUB sid\r\n`.
    static func writeUnsubscribe(sid: UInt64, into buffer: inout ByteBuffer) {
        buffer.writeStaticString("UNSUB ")
        buffer.writeDecimal(sid)
        buffer.writeStaticString("\r\n")
    }

    /// `PING\r\n`.
    static func writePing(into buffer: inout ByteBuffer) {
        buffer.writeStaticString("PING\r\n")
    }

    /// `PONG\r\n`.
    static func writePong(into buffer: inout ByteBuffer) {
        buffer.writeStaticString("PONG\r\n")
    }

    /// Keeps only the PUB and HPUB operations of a buffer this encoder wrote (used when a connection is lost:
    /// SUB, UNSUB and PING belong to the lost connection; subscriptions are sent again anyway).
    static func publishesOnly(_ buffer: ByteBuffer) -> ByteBuffer {
        var input = buffer
        var output = ByteBuffer()
        output.reserveCapacity(input.readableBytes)
        while input.readableBytes > 0 {
            guard let newline = input.readableBytesView.firstIndex(of: UInt8(ascii: "\n")) else { break }
            let lineLength = newline - input.readerIndex + 1
            guard let line = input.readSlice(length: lineLength) else { break }
            let view = line.readableBytesView
            let isPublish = view.starts(with: "PUB ".utf8) || view.starts(with: "HPUB ".utf8)
            guard isPublish else { continue }
            // The last token of the control line is the total size.
            let trimmed = view.dropLast(2)
            let sizeStart = trimmed.lastIndex(of: UInt8(ascii: " ")).map { $0 + 1 } ?? trimmed.startIndex
            var size = 0
            for digit in trimmed[sizeStart...] {
                size = size * 10 + Int(digit &- UInt8(ascii: "0"))
            }
            guard let body = input.readSlice(length: size + 2) else { break }
            output.writeImmutableBuffer(line)
            output.writeImmutableBuffer(body)
        }
        return output
    }
}
