import NIOCore

extension NATSConnection {
    /// Where `run()` is.
    enum Phase {
        case notStarted
        case running
        case finished
    }

    /// What a PING in flight waits for; PONGs answer PINGs in order.
    enum PingWaiter {
        case keepAlive
        case flush(NATSOneShot<Void>)
        case drain
    }

    /// Where a subscription's messages go.
    enum SubscriptionTarget {
        case inbox(NATSInbox)
        /// The wildcard subscription of ``NATSConnection/request(_:to:headers:timeout:)`` replies.
        case responses
    }

    struct SubscriptionEntry {
        var subscription: NATSSubscription
        var target: SubscriptionTarget
    }

    struct WeakInbox {
        weak var inbox: NATSInbox?
    }

    /// The state shared by publishers, subscribers, the channel handler and the driver, behind one lock.
    /// Lock order: this lock, then an inbox's lock; never the other way round.
    struct SharedState {
        var phase = Phase.notStarted
        /// The outbound buffer: publishes (bounded), SUB/UNSUB/PING (never refused).
        var outbound = ByteBuffer()
        /// The established channel, `nil` while disconnected. Only this one gets the outbound buffer.
        var channel: (any Channel)?
        var writable = true
        var flushScheduled = false
        var maxPayload = 1 << 20
        var headersSupported = true
        var serverInfo: NATSServerInfo?
        var pingWaiters = CircularBuffer<PingWaiter>()
        var nextSID: UInt64 = 1
        var subscriptions: [UInt64: SubscriptionEntry] = [:]
        var responsePrefix: String?
        var nextRequestToken: UInt64 = 0
        var requests: [String: NATSOneShot<NATSMessage>] = [:]
        var nextWaiterID: UInt64 = 0
        var connectedWaiters: [UInt64: NATSOneShot<Void>] = [:]
        var nextInboxID: UInt64 = 0
        var inboxes: [WeakInbox] = []
        var liveInboxesAtLastPrune = 0
        var statistics = NATSStatistics()
        var inputs: AsyncStream<DriverInput>.Continuation?
        var pendingInputs = 0

        /// Marks a flush as scheduled and returns the channel to run it on, unless one is scheduled already or
        /// nothing can be written now (disconnected or not writable: it is written at connect or when writable).
        mutating func scheduleFlush() -> (any Channel)? {
            guard let channel = self.channel, self.writable, !self.flushScheduled else { return nil }
            self.flushScheduled = true
            return channel
        }
    }
}
