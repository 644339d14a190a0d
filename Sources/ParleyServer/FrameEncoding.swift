import NIOCore
import ParleyProtocol

/// Encodes server frames into the bytes of a WebSocket text frame.
enum FrameEncoding {
    private static let eventPrefix = Array(#"{"type":"event","event":"#.utf8)

    /// An event frame around an event's stored JSON: no re-encoding, one buffer for every recipient.
    static func eventFrame(json: [UInt8]) -> ByteBuffer {
        var buffer = ByteBufferAllocator().buffer(capacity: eventPrefix.count + json.count + 1)
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
        ByteBuffer(bytes: (try? WireJSON.encode(frame)) ?? encodingFailure)
    }
}
