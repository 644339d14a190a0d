import NIOCore
import NIOWebSocket
import ParleyProtocol

/// Encodes server frames into complete WebSocket frames: the frame header and the JSON text in one buffer, ready for
/// the socket.
///
/// An event is framed once and the same buffer goes to every recipient's socket (``WebSocketConnectionHandler`` writes
/// these bytes past NIO's frame encoder, which would otherwise allocate and write a header per recipient).
enum FrameEncoding {
    private static let eventPrefix = Array(#"{"type":"event","event":"#.utf8)

    /// An event frame around an event's stored JSON: no re-encoding, one buffer for every recipient.
    static func eventFrame(json: [UInt8]) -> ByteBuffer {
        let length = eventPrefix.count + json.count + 1
        var buffer = header(opcode: .text, length: length)
        buffer.writeBytes(eventPrefix)
        buffer.writeBytes(json)
        buffer.writeInteger(UInt8(ascii: "}"))
        return buffer
    }

    private static let encodingFailure = Array(
        #"{"type":"error","code":"ERR_INTERNAL","message":"The server could not encode its answer."}"#.utf8
    )

    /// Any server frame.
    static func frame(_ frame: ServerFrame) -> ByteBuffer {
        // Only a non-finite number could fail to encode, and JSON input never decodes to one; should it happen,
        // the client still gets an answer rather than silence.
        control(.text, (try? WireJSON.encode(frame)) ?? encodingFailure)
    }

    /// A frame of any opcode around its (unmasked: the server never masks) payload.
    static func control(_ opcode: WebSocketOpcode, _ payload: some Collection<UInt8>) -> ByteBuffer {
        var buffer = header(opcode: opcode, length: payload.count)
        buffer.writeBytes(payload)
        return buffer
    }

    /// A close frame: the code, then the reason.
    static func close(code: UInt16, reason: String) -> ByteBuffer {
        var payload: [UInt8] = [UInt8(code >> 8), UInt8(code & 0xFF)]
        payload += utf8Prefix(reason, maxBytes: 123)  // a control frame carries at most 125 bytes
        return control(.connectionClose, payload)
    }

    /// The longest prefix of `text` that fits in `maxBytes` of UTF-8 without cutting a character in two.
    static func utf8Prefix(_ text: String, maxBytes: Int) -> [UInt8] {
        let bytes = Array(text.utf8)
        guard bytes.count > maxBytes else { return bytes }
        var end = maxBytes
        // Back up over continuation bytes (10xxxxxx) to the start of the character that does not fit.
        while end > 0, bytes[end] & 0xC0 == 0x80 { end -= 1 }
        return Array(bytes[..<end])
    }

    /// A buffer holding the header of a final, unmasked frame, with room for `length` bytes of payload.
    private static func header(opcode: WebSocketOpcode, length: Int) -> ByteBuffer {
        var buffer = ByteBufferAllocator().buffer(capacity: length + 10)
        buffer.writeInteger(0x80 | UInt8(webSocketOpcode: opcode))
        switch length {
        case ..<126:
            buffer.writeInteger(UInt8(length))
        case ..<65536:
            buffer.writeInteger(UInt8(126))
            buffer.writeInteger(UInt16(length))
        default:
            buffer.writeInteger(UInt8(127))
            buffer.writeInteger(UInt64(length))
        }
        return buffer
    }
}
