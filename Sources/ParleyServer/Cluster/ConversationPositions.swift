import Logging
import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyStore

/// The last sequence number published to this node's connections, per conversation the node follows (several nodes).
final class ConversationPositions: Sendable {
    private let positions = NIOLockedValueBox([ConversationRef: Int64]())

    /// Starts following a conversation from `position` (kept as it is when already followed).
    func follow(_ conversation: ConversationRef, from position: Int64) {
        positions.withLockedValue { positions in
            if positions[conversation] == nil { positions[conversation] = position }
        }
    }

    func unfollow(_ conversation: ConversationRef) {
        positions.withLockedValue { $0[conversation] = nil }
    }

    /// The last sequence number published here, when the conversation is followed.
    func position(_ conversation: ConversationRef) -> Int64? {
        positions.withLockedValue { $0[conversation] }
    }

    /// Records that `seq` was published (a conversation that is not followed stays so).
    func advance(_ conversation: ConversationRef, to seq: Int64) {
        positions.withLockedValue { positions in
            if let position = positions[conversation], seq > position { positions[conversation] = seq }
        }
    }

    var followed: [ConversationRef] { positions.withLockedValue { Array($0.keys) } }
}
