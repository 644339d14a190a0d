import Foundation
import ParleyProtocol

extension FuzzTarget {
    /// The client frame decoder (`ClientFrame+Decoding`): its hand-written path and `JSONDecoder` must agree on every
    /// input (the same frame, or both refuse it), and a frame read must encode and read back as itself.
    static let clientFrame = FuzzTarget(
        name: "client-frame",
        summary: "ClientFrame.decode against JSONDecoder on any bytes; what is read round-trips"
    ) { bytes throws(FuzzFinding) in
        let input = Array(bytes)
        let decoded = ClientFrameCase.outcome { try ClientFrame.decode(bytes: input) }
        let reference = ClientFrameCase.outcome { try JSONDecoder().decode(ClientFrame.self, from: Data(input)) }
        guard decoded == reference else {
            throw FuzzFinding("decode: \(decoded); JSONDecoder: \(reference)")
        }
        guard case .frame(let frame, let encoded) = decoded else { return }
        let again = ClientFrameCase.outcome { try ClientFrame.decode(bytes: encoded) }
        guard again == decoded else { throw FuzzFinding("\(frame) read back as \(again)") }
    }
}

enum ClientFrameCase {
    /// What a decoder made of an input. A frame is compared with its encoding with sorted keys too: strings that
    /// differ only in Unicode normalization (which `==` ignores) or a zero's sign encode differently.
    enum Outcome: Equatable, CustomStringConvertible {
        case frame(ClientFrame, [UInt8])
        case unknownType(String)
        case malformed

        var description: String {
            switch self {
            case .frame(_, let encoded): "frame \(String(decoding: encoded, as: UTF8.self))"
            case .unknownType(let type): "unknown type \(type.debugDescription)"
            case .malformed: "malformed"
            }
        }
    }

    static func outcome(_ decode: () throws -> ClientFrame) -> Outcome {
        do {
            let frame = try decode()
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            return .frame(frame, Array(try encoder.encode(frame)))
        } catch let unknown as UnknownFrameType {
            return .unknownType(unknown.type)
        } catch {
            return .malformed
        }
    }
}
