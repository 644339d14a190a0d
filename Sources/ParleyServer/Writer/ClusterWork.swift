import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import ParleyProtocol
import ParleyStore
import ServiceLifecycle

/// What the cluster gives the command writer's publishing loop, in order with this node's own batches.
enum ClusterWork: Sendable {
    /// Events of a conversation another node committed.
    case events(ConversationRef, [RoutedEvent])
    /// Read the last sequence number of these conversations (nil: every followed one) and publish what is missing.
    case sync([ConversationRef]?)
    /// A gap in a conversation's events waited for long enough: read what is still missing from the database.
    case fillGap(ConversationRef)
}
