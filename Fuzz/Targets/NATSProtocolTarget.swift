import NATSNIO
import NIOCore

extension FuzzTarget {
    /// The NATS client's parser of what a server sends (`NATSProtocolParser`: INFO, MSG, HMSG with headers, PING,
    /// PONG, +OK, -ERR), fed the input at once and again cut into pieces (its first byte sets their size): the same
    /// operations and the same error either way, and after an error every call throws it again.
    static let natsProtocol = FuzzTarget(
        name: "nats-protocol",
        summary: "NATSProtocolParser: the same operations however the bytes are cut; errors stay",
        largestPiece: 32
    ) { pieces throws(FuzzFinding) in
        try NATSProtocolCase.run(pieces)
    }
}

enum NATSProtocolCase {
    static func run(_ pieces: [UnsafeRawBufferPointer]) throws(FuzzFinding) -> [String] {
        var parser = NATSProtocolParser()
        var buffer = ByteBuffer()
        var outputs: [String] = []
        for piece in pieces {
            buffer.writeBytes(piece)
            do {
                while let operation = try parser.next(from: &buffer) {
                    outputs.append(describe(operation))
                }
            } catch {
                outputs.append("error: \(error)")
                // A parser that failed fails again, whatever comes next.
                buffer.writeBytes([UInt8]("PING\r\n".utf8))
                let next = Result { () throws(NATSProtocolError) in try parser.next(from: &buffer) }
                guard case .failure(let again) = next, again == error else {
                    throw FuzzFinding("after \(error) the parser gave \(next)")
                }
                return outputs
            }
        }
        return outputs
    }

    static func describe(_ operation: NATSServerOperation) -> String {
        switch operation {
        case .message(let message):
            let headers = message.headers.map { "\($0)" } ?? "none"
            return "MSG \(message.subject) \(message.sid) \(message.replyTo ?? "-") headers \(headers) "
                + "payload \(Array(message.payload.readableBytesView))"
        default:
            return "\(operation)"
        }
    }
}
