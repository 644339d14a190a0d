import ParleyProtocol
import ParleyStore

/// What publishing one stored batch collects, passed explicitly from the command writer down to the hub: the writers
/// to wake once the whole batch is published and answered (one flush per socket for the batch), the users whose
/// unread counts were read with the batch (their events' changes are not recorded again: the read counted them), and
/// whether the batch's events moved counts to push (``EventPublisher/finish(_:)`` pushes them in the batch's flush).
struct BatchDelivery {
    var wakeUps = WakeUps()
    let countedWithBatch: Set<UserKey>
    /// The batch's events made users' unread counts due (``UnreadNotifier/published(_:recipients:countedWithBatch:)``).
    var unreadDue = false

    /// For a batch whose transaction read `unread` (``BatchOutcome/unread``).
    init(countedWithBatch unread: [(UnreadRequest, UnreadSummary)] = []) {
        countedWithBatch = Set(unread.map { UserKey(appId: $0.0.appId, uid: $0.0.uid) })
    }
}
