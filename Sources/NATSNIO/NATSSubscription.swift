/// A handle to a subscription made with ``NATSConnection/subscribe(to:queueGroup:into:)``.
///
/// Pass it to ``NATSConnection/unsubscribe(_:)`` to end the subscription.
public struct NATSSubscription: Sendable, Hashable {
    /// The subscription id sent in SUB; messages carry it in ``NATSMessage/sid``.
    public let sid: UInt64
    /// The subject (wildcards allowed).
    public let subject: String
    /// The queue group, if any: each message goes to one member of the group.
    public let queueGroup: String?

    /// Creates a handle. Only the connection makes meaningful ones.
    /// - Parameters:
    ///   - sid: The subscription id.
    ///   - subject: The subject.
    ///   - queueGroup: The queue group.
    public init(sid: UInt64, subject: String, queueGroup: String?) {
        self.sid = sid
        self.subject = subject
        self.queueGroup = queueGroup
    }
}
