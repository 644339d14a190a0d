/// A user of an app, as the hub, the unread notifier, the presence tracker and the push dispatcher key their maps by it.
///
/// Hashed once, when made: a message to a group of five looks each recipient up a dozen times (the hub's connections,
/// the unread notifier's budgets, holds and ledgers), and hashing two strings every time was most of what the
/// notifier's bookkeeping cost the command writer's thread.
struct UserKey: Hashable, Sendable {
    let appId: String
    let uid: String
    /// The strings' hash (`hashValue`'s seed is per process, so is this).
    private let hash: Int

    init(appId: String, uid: String) {
        self.appId = appId
        self.uid = uid
        var hasher = Hasher()
        hasher.combine(appId)
        hasher.combine(uid)
        hash = hasher.finalize()
    }

    static func == (lhs: UserKey, rhs: UserKey) -> Bool {
        lhs.hash == rhs.hash && lhs.uid == rhs.uid && lhs.appId == rhs.appId
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(hash)
    }
}
