import HTTPTypes
import NIOCore
import NIOHTTP1
import ParleyProtocol

/// The answers the connection edge gives before (or instead of) a request reaches the router: a complete HTTP/1.1
/// response with the documented JSON error body and `Connection: close`, after which the connection closes.
enum EdgeResponse {
    /// The response as bytes for the socket (from a handler that sits next to it).
    static func bytes(
        _ status: HTTPResponse.Status, code: ErrorCode, _ message: String, retryAfter: Duration? = nil
    ) -> ByteBuffer {
        let body = self.body(code: code, message, retryAfter: retryAfter)
        var head = "HTTP/1.1 \(status.code) \(status.reasonPhrase)\r\nContent-Type: application/json; charset=utf-8\r\n"
        head += "Content-Length: \(body.count)\r\nConnection: close\r\n"
        if let retryAfter { head += "Retry-After: \(retryAfterSeconds(retryAfter))\r\n" }
        head += "\r\n"
        var buffer = ByteBufferAllocator().buffer(capacity: head.utf8.count + body.count)
        buffer.writeString(head)
        buffer.writeBytes(body)
        return buffer
    }

    /// The response as NIO's HTTP/1 parts (from a handler in front of `HTTPResponseEncoder`).
    static func parts(
        _ status: HTTPResponse.Status, code: ErrorCode, _ message: String, headers extra: [(String, String)] = []
    ) -> [HTTPServerResponsePart] {
        let body = self.body(code: code, message, retryAfter: nil)
        let headers = HTTPHeaders(
            [
                ("Content-Type", "application/json; charset=utf-8"), ("Content-Length", "\(body.count)"),
                ("Connection", "close"),
            ] + extra
        )
        let head = HTTPResponseHead(
            version: .http1_1, status: HTTPResponseStatus(statusCode: status.code, reasonPhrase: status.reasonPhrase),
            headers: headers
        )
        return [.head(head), .body(.byteBuffer(ByteBuffer(bytes: body))), .end(nil)]
    }

    /// `{"error": {"code", "message", "retryAfterMs"?}}`.
    static func body(code: ErrorCode, _ message: String, retryAfter: Duration?) -> [UInt8] {
        let response = ErrorResponse(code: code, message: message, retryAfterMs: retryAfter?.roundedUpMilliseconds)
        return (try? WireCoding.encode(response)) ?? Array(#"{"error":{"code":"ERR_INTERNAL","message":""}}"#.utf8)
    }

    /// How long a refused connection goes on reading (and discarding) what its client still sends.
    static let linger: TimeAmount = .seconds(1)

    /// Ends a connection after its refusal was written, without losing the refusal: closing at once, with the rest of
    /// a request still unread, makes the kernel reset the connection, and a client then loses the answer it had not
    /// read yet (RFC 9112 section 9.6). So the server's side closes first (FIN after the answer), what the client
    /// still sends is read and dropped, and the connection closes for good when the client closes its side or after
    /// ``linger``.
    static func closeAfterAnswer(_ channel: any Channel) {
        channel.close(mode: .output, promise: nil)
        channel.eventLoop.scheduleTask(in: linger) { channel.close(promise: nil) }
    }

    /// `Retry-After` is in whole seconds: rounded up, at least 1.
    static func retryAfterSeconds(_ duration: Duration) -> Int64 {
        max(1, (duration.roundedUpMilliseconds + 999) / 1000)
    }
}
