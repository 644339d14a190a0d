import Logging
import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyStore
import ServiceLifecycle

/// Pushes `unread.update` to a user's own connections when their unread counts change.
///
/// A count that goes out with the batch that changed it (below) costs a read in a warm transaction and a few bytes in
/// a write made anyway; a push of its own costs a wake-up and a socket write, and a read transaction when the ledger
/// (below) cannot tell the count. So pushes are taken from a budget per user, ``ServerConfiguration/unreadPushBurst``
/// in a row, earned back at one per ``ServerConfiguration/unreadPushInterval`` (a token bucket, ``PushBudget``), and
/// the user is held for an interval only once it is spent; a batch that makes more than ``maxUsersForBurst`` users due
/// (a message to a large group) empties the budget of each and holds them, as a burst of 1 would. While held, changes
/// are gathered and pushed together when the interval ends. A busy group thus costs each member at most one push per
/// interval, and a member of a quiet conversation gets each count just after the message that changed it.
///
/// Pushes go out in batches, written with the hand-written encoder, in the flush of the batch that changed them when
/// they can. A user whose ledger (below) a batch's messages move is pushed from it when the batch's publication ends
/// (``published(_:recipients:countedWithBatch:)``, ``pushDue(into:)``), nothing read. On a store that reads unread
/// counts with a batch of commands (SQLite, ``ParleyStore/apply(_:readingUnread:)``), the other users a batch makes due
/// are chosen in its transaction, their counts read there, and pushed with the batch's events (``dueWithBatch(_:)``,
/// ``deliverWithBatch(_:into:)``). Every other push is made by one task (``run()``): the users due are read together
/// (one read transaction on SQLite). The intervals are ``FixedDelayTimers`` (one queue, one sleeping task, ends
/// rounded to 10 ms); when one ends with changes waiting, the user is pushed again. Recording a change costs a lock,
/// not a task or a timer per user.
///
/// A push carries the user's total over all their conversations, and reading it costs a row per conversation the user
/// is in. So the notifier keeps, for each user it pushes, the total and every conversation's count with the positions
/// it was counted at (``UnreadLedger``), read whole once, and moves it by the events published here
/// (``published(_:recipients:countedWithBatch:)``, ``State/observe(_:_:_:connected:now:)``): a conversation's events
/// reach every node with a participant connected in order, each once, so a message of someone else's counted up to
/// the event before it is one more, the user's own message or a receipt past everything counted leaves none, and an
/// event already counted (a read's snapshot can be newer than what was published here) is nothing; such a push reads
/// nothing. Anything else (a deletion, a departure, a gap, a read still out) is read: only the conversations that
/// changed, the total moved by their difference. A batch reads a user with no ledger whole only when they are in a few conversations; the
/// notifier's task reads the others, off the command writer's thread. A change while the user is not connected here
/// drops their ledger, and so does a read that comes back older than one already applied (reads are numbered when
/// asked for), the user being read whole again. A ledger is read whole again after one to two lifetimes
/// (`ledgerLifetime`, a minute) at the latest.
final class UnreadNotifier: Service {
    typealias UserKey = ParleyServer.UserKey

    /// A user's push budget: `burst` intervals of credit at most, earned back as time passes; a push spends one
    /// interval. Kept in `Duration`s so that an interval's end always earns a whole push back.
    struct PushBudget {
        var credit: Duration
        var last: Duration

        /// Spends one push at `now` (the caller checked that the user is not held); returns whether the budget is
        /// spent, the user then to be held for an interval.
        mutating func spend(now: Duration, interval: Duration, burst: Int) -> Bool {
            if now > last {
                credit = min(credit + (now - last), interval * burst)
                last = now
            }
            credit = max(credit - interval, .zero)
            return credit < interval
        }

        /// Whether the budget is whole again at `now` (it then holds nothing worth keeping).
        func isFull(now: Duration, interval: Duration, burst: Int) -> Bool {
            credit + max(now - last, .zero) >= interval * burst
        }
    }

    /// A user's count in one conversation, and the positions it was counted at.
    struct Position: Equatable {
        var unread: Int
        /// The user's read position.
        var readSeq: Int64
        /// The conversation's last sequence number counted: every event up to it is in `unread`, none after it.
        var lastSeq: Int64

        func summary(_ conversationId: String) -> ConversationUnread {
            ConversationUnread(conversationId: conversationId, unread: unread, readSeq: readSeq, lastSeq: lastSeq)
        }
    }

    /// What a user's pushes said: the total and every conversation of theirs with its count, at the read numbered
    /// `ticket`, moved since by the events published here (``observe(_:_:_:connected:now:)``).
    struct UnreadLedger {
        var total: Int
        /// Every conversation of the user's, as read or moved since.
        var conversations: [String: Position]
        /// The last read applied: a read with a lower number is older.
        var ticket: UInt64
        /// When every conversation is to be read again: ``State/ledgerLifetime`` after they were, and up to as long
        /// again (spread by the read's number), so that the users read together at a start are not all read again at
        /// once a lifetime later.
        var expiresAt: Duration

        /// The counts of conversations that were in the user's ledger (nil: no more), as a push lists them.
        func listed(_ conversationIds: some Sequence<String>) -> [ConversationUnread] {
            conversationIds.sorted().compactMap { id in conversations[id].map { $0.summary(id) } }
        }
    }

    /// What an event published here does to one user's count in its conversation.
    enum Change: Equatable {
        /// A message of someone else's, numbered `seq`.
        case arrived(seq: Int64)
        /// A message of the user's own: sending reads the conversation up to it.
        case sent(seq: Int64)
        /// The user read up to `seq` (a receipt: its event has no number).
        case read(seq: Int64)
        /// An event numbered `seq` that moves no count (an edit, a reaction, someone else joining).
        case passed(seq: Int64)
        /// A change only a read can tell (a deletion, a departure, a conversation deleted or back).
        case changed
    }

    /// A read asked for a user and not applied yet.
    struct AskedRead {
        var ticket: UInt64
        var at: Duration
        /// Whether it reads every conversation.
        var whole: Bool
    }

    /// Everything the notifier keeps for one user, in one entry of one map: recording an event's change, spending a
    /// push, asking for a read and applying it each look the user up once.
    struct Entry {
        /// Conversations whose counts changed and are to be read.
        var dirty: Set<String>?
        /// Conversations whose counts moved in the ledger and were not pushed yet (no read needed).
        var moved: Set<String>?
        /// Whether the budget is spent, until the interval ends.
        var held = false
        /// The budget, while not whole (nil: whole; dropped once whole, see ``State/sweep(now:interval:burst:)``).
        var budget: PushBudget?
        /// The total and counts pushed lately (dropped at a sweep once expired).
        var ledger: UnreadLedger?
        /// The last read asked for, and when (dropped once applied, or at a sweep 10 s later). While one is out, the
        /// ledger is not moved by events: the read's snapshot may be older or newer than them, so the conversations
        /// are read again after it. One of every conversation asked with a batch fails for a user in more than
        /// ``UnreadNotifier/maxConversationsWithBatch`` conversations: the publication records their change, and the
        /// notifier's task reads them whole in place of that push, whose budget the batch spent (``State/take``
        /// does not hold a user still ``readingWhole``).
        var asked: AskedRead?

        /// Whether the entry holds nothing (a sweep drops it).
        var isEmpty: Bool { dirty == nil && moved == nil && !held && budget == nil && ledger == nil && asked == nil }

        /// Whether a change waits to be pushed, or the user is held: a new change then joins what waits.
        var waits: Bool { dirty != nil || moved != nil || held }

        /// Whether a read was asked for and not applied (it may be running, or have failed).
        var reading: Bool {
            guard let asked else { return false }
            return asked.ticket > ledger?.ticket ?? 0
        }

        /// Whether a read of every conversation was asked for and not applied (it may be running, or have failed: a
        /// read with a batch past ``UnreadRequest/maxConversations``).
        var readingWhole: Bool { reading && asked?.whole == true }

        /// Whether the total can be moved by what changes (a ledger not expired).
        func hasLedger(now: Duration) -> Bool {
            ledger.map { now < $0.expiresAt } ?? false
        }

        /// Records changes to read and push; returns whether the user is ready now (nothing waited, not held).
        mutating func record(_ conversationIds: some Sequence<String>) -> Bool {
            let ready = !waits
            if dirty == nil { dirty = Set(conversationIds) } else { dirty!.formUnion(conversationIds) }
            return ready
        }

        /// Records that the ledger moved in `conversationId`, to push with no read; returns whether the user is ready
        /// now (nothing waited, not held).
        mutating func move(_ conversationId: String) -> Bool {
            let ready = !waits
            if moved == nil { moved = [conversationId] } else { moved!.insert(conversationId) }
            return ready
        }

        /// A push at `now` (the user is not held): spends the budget, and holds the user when it is spent; one of
        /// many users made due at once (not `bursting`: more than ``UnreadNotifier/maxUsersForBurst``) empties it and
        /// is held, as a burst of 1 would. Returns whether the user is now held (the caller starts the interval).
        mutating func push(now: Duration, interval: Duration, burst: Int, bursting: Bool = true) -> Bool {
            guard bursting else {
                budget = PushBudget(credit: .zero, last: now)
                held = true
                return true
            }
            var budget = self.budget ?? PushBudget(credit: interval * burst, last: now)
            let spent = budget.spend(now: now, interval: interval, burst: burst)
            self.budget = budget
            if spent { held = true }
            return spent
        }

        /// The push of what moved in the ledger, when that is all that waits and the ledger can tell it (nothing to
        /// read, none being read): taken, and the push spent (``push(now:interval:burst:bursting:)``). Nil otherwise,
        /// nothing taken.
        mutating func pushMoved(
            now: Duration, interval: Duration, burst: Int, bursting: Bool
        ) -> (summary: UnreadSummary, held: Bool)? {
            guard dirty == nil, let moved, hasLedger(now: now), !reading, let ledger else { return nil }
            self.moved = nil
            let held = push(now: now, interval: interval, burst: burst, bursting: bursting)
            return (UnreadSummary(total: ledger.total, conversations: ledger.listed(moved)), held)
        }

        /// See ``State/observe(_:_:_:connected:now:)``: returns whether the user is to be pushed now.
        mutating func observe(_ conversationId: String, _ change: Change, now: Duration) -> Bool {
            let ownMessage: Bool
            if case .sent = change { ownMessage = true } else { ownMessage = false }
            guard hasLedger(now: now), !reading, dirty == nil, var position = ledger?.conversations[conversationId]
            else {
                // A message of the user's own is not pushed by itself: without a ledger there is no count to move.
                if ownMessage && ledger == nil && !reading { return false }
                return record(CollectionOfOne(conversationId))
            }
            let before = position.unread
            switch change {
            case .arrived(let seq):
                if seq <= position.lastSeq { return false }
                guard seq == position.lastSeq + 1 else { return record(CollectionOfOne(conversationId)) }
                position.unread += 1
                position.lastSeq = seq
            case .sent(let seq), .read(let seq):
                if case .read = change, seq <= position.readSeq { return false }
                // Messages of others after it would stay unread: how many, only a read can tell.
                guard seq >= position.lastSeq else { return record(CollectionOfOne(conversationId)) }
                position = Position(unread: 0, readSeq: seq, lastSeq: seq)
            case .passed, .changed:
                return record(CollectionOfOne(conversationId))
            }
            ledger!.conversations[conversationId] = position
            ledger!.total += position.unread - before
            // The sender's count falling to 0 goes with their next push.
            return ownMessage ? false : move(conversationId)
        }
    }

    struct State {
        /// What is kept for each user (``Entry``): one entry per user, dropped at a sweep once it holds nothing.
        var users: [UserKey: Entry] = [:]
        /// Users to push now.
        var ready: [UserKey] = []
        var lastSweep: Duration = .zero
        var ledgerLifetime: Duration
        /// The number of the last read asked for.
        var lastTicket: UInt64 = 0

        init(ledgerLifetime: Duration = .seconds(60)) {
            self.ledgerLifetime = ledgerLifetime
        }

        /// `key`'s entry, changed in place (created empty when there is none): one lookup.
        private mutating func withEntry<Result>(_ key: UserKey, _ body: (inout Entry) -> Result) -> Result {
            body(&users[key, default: Entry()])
        }

        /// The read of `key`'s counts in `conversationIds`, numbered: only those conversations when the user's ledger
        /// can be moved by them, every conversation otherwise.
        mutating func request(_ key: UserKey, _ conversationIds: [String], now: Duration) -> UnreadRequest {
            lastTicket += 1
            let ticket = lastTicket
            let whole = withEntry(key) { entry in
                let whole = !entry.hasLedger(now: now)
                entry.asked = AskedRead(ticket: ticket, at: now, whole: whole)
                return whole
            }
            return UnreadRequest(
                appId: key.appId, uid: key.uid, conversationIds: conversationIds, everyConversation: whole,
                ticket: ticket
            )
        }

        /// A read came back: what to push (the conversations that changed, the user's total), after moving the user's
        /// ledger. Nil when the total is not known (no ledger to move, or a later read applied already): the ledger is
        /// dropped and the user is to be read whole (``rereadWhole(_:)``).
        mutating func apply(_ request: UnreadRequest, _ read: UnreadSummary, now: Duration) -> UnreadSummary? {
            apply(request, read, for: UserKey(appId: request.appId, uid: request.uid), now: now)
        }

        /// ``apply(_:_:now:)`` with the request's user made already.
        mutating func apply(
            _ request: UnreadRequest, _ read: UnreadSummary, for key: UserKey, now: Duration
        ) -> UnreadSummary? {
            // The conversations asked for are few: looked up in the array, a set only when there are many.
            let changed = request.conversationIds
            let changedSet = changed.count > 8 ? Set(changed) : nil
            let isChanged = { (id: String) -> Bool in changedSet?.contains(id) ?? changed.contains(id) }
            let listed = read.conversations.filter { isChanged($0.conversationId) }
            let lifetime = ledgerLifetime
            return withEntry(key) { entry -> UnreadSummary? in
                guard (entry.ledger?.ticket ?? 0) < request.ticket, request.everyConversation || entry.ledger != nil
                else {
                    entry.ledger = nil
                    return nil
                }
                if let asked = entry.asked, asked.ticket <= request.ticket { entry.asked = nil }
                if request.everyConversation {
                    var conversations: [String: Position] = [:]
                    conversations.reserveCapacity(read.conversations.count)
                    for conversation in read.conversations {
                        conversations[conversation.conversationId] = Position(
                            unread: conversation.unread, readSeq: conversation.readSeq, lastSeq: conversation.lastSeq)
                    }
                    let spread = lifetime * (Double(request.ticket % 64) / 64)
                    entry.ledger = UnreadLedger(
                        total: read.total, conversations: conversations, ticket: request.ticket,
                        expiresAt: now + lifetime + spread)
                    return UnreadSummary(total: read.total, conversations: listed)
                }
                // A conversation asked for and not read has none: the user left it, or it is deleted.
                for id in changed {
                    let count = listed.first { $0.conversationId == id }
                    entry.ledger!.total += (count?.unread ?? 0) - (entry.ledger!.conversations[id]?.unread ?? 0)
                    entry.ledger!.conversations[id] = count.map {
                        Position(unread: $0.unread, readSeq: $0.readSeq, lastSeq: $0.lastSeq)
                    }
                }
                entry.ledger!.ticket = request.ticket
                return UnreadSummary(total: entry.ledger!.total, conversations: listed)
            }
        }

        /// An event published here changes `key`'s count in `conversationId` (events of a conversation are published
        /// in order, each once, on every node that has a participant connected). The ledger moves by it when it can
        /// tell how: nothing out to read, the conversation counted up to the event before this one. A message of
        /// someone else's counts one more; the user's own message, or a receipt, past everything counted there leaves
        /// none; an event counted already (a read's snapshot can be newer than what was published here) changes
        /// nothing. Anything else, or a user with no ledger, is read (``record(_:_:)``). Returns whether the user is
        /// to be pushed now.
        mutating func observe(
            _ key: UserKey, _ conversationId: String, _ change: Change, connected: Bool, now: Duration
        ) -> Bool {
            if case .passed(let seq) = change {
                // A ledger counted up to just before it stays whole past it; nothing to push.
                guard let index = users.index(forKey: key), users.values[index].ledger != nil else { return false }
                if let position = users.values[index].ledger!.conversations[conversationId],
                    seq == position.lastSeq + 1
                {
                    users.values[index].ledger!.conversations[conversationId]!.lastSeq = seq
                }
                return false
            }
            guard connected else {
                // Users with no live connection here read their counts when they come back; their totals here are
                // stale.
                if let index = users.index(forKey: key) { users.values[index].ledger = nil }
                return false
            }
            let ready = withEntry(key) { $0.observe(conversationId, change, now: now) }
            if ready { self.ready.append(key) }
            return ready
        }

        /// The users to push now, each once: a user whose ledger moved only is pushed from it, one with conversations
        /// to read is read (those and the ones moved). Each push spends from the user's budget, who is held for an
        /// interval once it is spent (`held`, to start).
        mutating func take(now: Duration, interval: Duration, burst: Int) -> (
            reads: [UnreadRequest], pushes: [(UserKey, UnreadSummary)], held: [UserKey]
        ) {
            sweep(now: now, interval: interval, burst: burst)
            var reads: [UnreadRequest] = []
            var pushes: [(UserKey, UnreadSummary)] = []
            var heldNow: [UserKey] = []
            for key in ready {
                let toRead = withEntry(key) { entry -> [String]? in
                    // Held (their interval's end makes them ready again), or nothing waits any more.
                    guard !entry.held, entry.dirty != nil || entry.moved != nil else { return nil }
                    if let (summary, held) = entry.pushMoved(now: now, interval: interval, burst: burst, bursting: true)
                    {
                        pushes.append((key, summary))
                        if held { heldNow.append(key) }
                        return nil
                    }
                    let conversations = (entry.dirty ?? []).union(entry.moved ?? []).sorted()
                    entry.dirty = nil
                    entry.moved = nil
                    // In place of a push with a batch, which spent from the budget already (``Entry/asked``).
                    if !entry.readingWhole, entry.push(now: now, interval: interval, burst: burst) {
                        heldNow.append(key)
                    }
                    return conversations
                }
                if let toRead { reads.append(request(key, toRead, now: now)) }
            }
            ready.removeAll(keepingCapacity: true)
            return (reads, pushes, heldNow)
        }

        /// The users ready now whose ledger moved and who need no read, pushed from it (``take(now:interval:burst:)``
        /// for them alone); more than `maxUsersForBurst` of them are each held at once, as a burst of 1 would. The
        /// users with conversations to read stay ready, for the notifier's task (`toRead`).
        mutating func takeMoved(now: Duration, interval: Duration, burst: Int, maxUsersForBurst: Int) -> (
            pushes: [(UserKey, UnreadSummary)], held: [UserKey], toRead: Bool
        ) {
            guard !ready.isEmpty else { return ([], [], false) }
            sweep(now: now, interval: interval, burst: burst)
            let bursting = ready.count <= maxUsersForBurst
            var pushes: [(UserKey, UnreadSummary)] = []
            var heldNow: [UserKey] = []
            var left: [UserKey] = []
            for key in ready {
                let readWaits = withEntry(key) { entry -> Bool in
                    guard !entry.held, entry.dirty != nil || entry.moved != nil else { return false }
                    guard
                        let (summary, held) = entry.pushMoved(
                            now: now, interval: interval, burst: burst, bursting: bursting)
                    else { return true }
                    pushes.append((key, summary))
                    if held { heldNow.append(key) }
                    return false
                }
                if readWaits { left.append(key) }
            }
            ready = left
            return (pushes, heldNow, !left.isEmpty)
        }

        /// `requests` came back without a total: their users' changes are recorded again, to be read whole. Returns
        /// whether one is ready now (not held).
        mutating func rereadWhole(_ requests: [UnreadRequest]) -> Bool {
            var ready = false
            for request in requests {
                ready = record(UserKey(appId: request.appId, uid: request.uid), request.conversationIds) || ready
            }
            return ready
        }

        /// Records changes of `key`'s counts to read and push: a user with nothing waiting and not held is ready now
        /// (returns true).
        mutating func record(_ key: UserKey, _ conversationIds: some Sequence<String>) -> Bool {
            let ready = withEntry(key) { $0.record(conversationIds) }
            if ready { self.ready.append(key) }
            return ready
        }

        /// A push to `key` (not held) at `now` (``Entry/push(now:interval:burst:bursting:)``). Returns whether the user
        /// is now held (the caller then starts the interval).
        mutating func push(_ key: UserKey, now: Duration, interval: Duration, burst: Int, bursting: Bool = true) -> Bool
        {
            sweep(now: now, interval: interval, burst: burst)
            return withEntry(key) { $0.push(now: now, interval: interval, burst: burst, bursting: bursting) }
        }

        /// An interval ended: the user is no longer held; returns whether a change of theirs waits (to push now).
        mutating func release(_ key: UserKey) -> Bool {
            guard let index = users.index(forKey: key) else { return false }
            users.values[index].held = false
            return users.values[index].dirty != nil || users.values[index].moved != nil
        }

        /// Drops the budgets that are whole again (a missing budget is a whole one), the ledgers past their lifetime
        /// and the reads long asked, then the entries left empty, at most once per 4 × `burst` intervals: the map
        /// holds the users pushed lately, not every user ever pushed.
        mutating func sweep(now: Duration, interval: Duration, burst: Int) {
            guard now - lastSweep >= interval * max(burst, 1) * 4 else { return }
            lastSweep = now
            var emptied = false
            for index in users.indices {
                if let budget = users.values[index].budget, budget.isFull(now: now, interval: interval, burst: burst) {
                    users.values[index].budget = nil
                }
                if let ledger = users.values[index].ledger, now >= ledger.expiresAt { users.values[index].ledger = nil }
                // A read takes milliseconds, not seconds.
                if let asked = users.values[index].asked, now - asked.at >= .seconds(10) {
                    users.values[index].asked = nil
                }
                emptied = emptied || users.values[index].isEmpty
            }
            if emptied { users = users.filter { !$0.value.isEmpty } }
        }
    }

    private let store: any ParleyStore
    private let hub: Hub
    private let interval: Duration
    private let burst: Int
    private let logger: Logger
    private let time: ServerClock
    private let state: NIOLockedValueBox<State>
    /// Most users whose counts the notifier's task reads in one transaction.
    static let usersPerRead = 128
    /// Most conversations of a user read whole with a batch (``State/asked``).
    static let maxConversationsWithBatch = 16
    /// Most users a batch may make due and still push from their budgets. Past it, each user it makes due is held at
    /// once: the first messages to a group of 1,000 read 1,000 counts once, not five times.
    private let maxUsersForBurst: Int
    private let wakeUp = WakeUpSignal()
    /// The running intervals.
    private let holds: FixedDelayTimers<UserKey>
    /// The store's inline reads (SQLite): the notifier's task reads counts on its own thread.
    private let inlineReads: (any InlineReads)?

    /// - Parameters:
    ///   - interval: How long a user whose budget is spent waits for the next push; a push is earned back per interval.
    ///   - burst: Pushes a user may get in a row (at least 1; 1: one push per interval).
    ///   - maxUsersForBurst: Past this many users made due by one batch, each is held at once.
    ///   - ledgerLifetime: How long a user's total is moved by the conversations that change before every conversation
    ///     of theirs is read again.
    init(
        store: any ParleyStore, hub: Hub, interval: Duration, burst: Int = 1, maxUsersForBurst: Int = 256,
        ledgerLifetime: Duration = .seconds(60), time: ServerClock, logger: Logger
    ) {
        self.state = NIOLockedValueBox(State(ledgerLifetime: ledgerLifetime))
        self.store = store
        self.hub = hub
        self.interval = interval
        self.burst = max(burst, 1)
        self.maxUsersForBurst = maxUsersForBurst
        self.time = time
        self.logger = logger
        self.holds = FixedDelayTimers(delay: interval, timeline: time.timeline)
        self.inlineReads = store.capabilities.inlineReads
    }

    /// In the transaction that stores a batch (``ParleyStore/apply(_:readingUnread:)``): the users whose counts the batch changes and who
    /// are due now (connected here, budget not spent, no push pending). The push is taken from their budget now, and
    /// their counts are read in the transaction and go out with the batch's events (``deliverWithBatch(_:into:)``).
    /// Users who are held or pending are left to ``changed(appId:uids:conversationId:)`` when the batch is published,
    /// after its commit, as with any store.
    func dueWithBatch(_ results: [Result<CommandResult, DomainError>]) -> [UnreadRequest] {
        // A message moves the ledger of a user who has one (``published(_:recipients:countedWithBatch:)``, pushed at
        // the batch's end): only the others are read with the batch, and every user for any other change.
        var affected: [(key: UserKey, conversationId: String, movesLedger: Bool)] = []
        for case .success(let outcome) in results {
            for stored in outcome.events {
                let event = stored.event
                guard let (conversationId, uids) = Self.affected(by: event, recipients: outcome.recipients) else {
                    continue
                }
                var movesLedger = false
                if case .messageSent = event.payload { movesLedger = true }
                affected += uids.map { (UserKey(appId: event.appId, uid: $0), conversationId, movesLedger) }
            }
        }
        guard !affected.isEmpty else { return [] }
        let now = time.timeline.now()
        // Most users of a busy group are held: the hub is asked only about the others.
        let candidates = state.withLockedValue { state -> Set<UserKey> in
            var candidates = Set<UserKey>()
            for (key, _, movesLedger) in affected {
                guard let entry = state.users[key] else {
                    candidates.insert(key)
                    continue
                }
                if entry.waits || (movesLedger && entry.hasLedger(now: now) && !entry.reading) { continue }
                candidates.insert(key)
            }
            return candidates
        }
        let connected = candidates.filter { hub.hasConnections($0) }
        guard !connected.isEmpty else { return [] }
        // Each user once, with the conversations the batch changed for them, in the order first affected.
        var users: [UserKey] = []
        var conversations: [UserKey: [String]] = [:]
        for (key, conversationId, _) in affected where connected.contains(key) {
            if conversations[key]?.append(conversationId) == nil {
                users.append(key)
                conversations[key] = [conversationId]
            }
        }
        let bursting = connected.count <= maxUsersForBurst
        let (requests, held) = state.withLockedValue { state -> ([UnreadRequest], [UserKey]) in
            var requests: [UnreadRequest] = []
            var held: [UserKey] = []
            for key in users {
                // Checked again under this lock: a change may have come meanwhile.
                guard !(state.users[key]?.waits ?? false) else { continue }
                if state.push(key, now: now, interval: interval, burst: burst, bursting: bursting) { held.append(key) }
                let ids = conversations[key]!
                var request = state.request(key, ids.count == 1 ? ids : Array(Set(ids)).sorted(), now: now)
                if request.everyConversation {
                    // A user with no total to move is read whole here only when in a few conversations: one in
                    // many would hold up every message on the writer's thread. Their read fails, the publication
                    // records the change, and the notifier's task reads them whole.
                    request.maxConversations = Self.maxConversationsWithBatch
                }
                requests.append(request)
            }
            return (requests, held)
        }
        for key in held { holds.schedule(key) }
        return requests
    }

    /// Pushes the counts read with a batch (``dueWithBatch(_:)``), after its events, leaving the writers to wake in
    /// the batch's `wakeUps`: they go out in the same flush as the events that changed them. The publication does not
    /// record those users' changes again (``published(_:recipients:countedWithBatch:)``).
    func deliverWithBatch(_ unread: [(UnreadRequest, UnreadSummary)], into wakeUps: inout WakeUps) {
        guard !unread.isEmpty else { return }
        deliver(unread, into: &wakeUps)
    }

    /// What a published event changes: the conversation and the users whose unread counts in it moved.
    static func affected(by event: Event, recipients: [String]) -> (conversationId: String, uids: [String])? {
        guard let conversationId = event.conversationId else { return nil }
        switch event.payload {
        case .messageSent(let message) where message.silent != true:
            let actor = event.context.createdBy
            return (conversationId, recipients.filter { $0 != actor })
        case .messageDeleted(let message):
            // It may have been unread for anyone but its sender.
            return (conversationId, recipients.filter { $0 != message.sender })
        case .messageRead(let receipt):
            return (conversationId, [receipt.uid])
        case .conversationDeleted, .conversationUndeleted:
            return (conversationId, recipients)
        case .participantRemoved(let participant):
            return (conversationId, [participant.uid])
        default:
            return nil
        }
    }

    /// What an event changes in the counts of its recipients, each user once: nothing for events that are neither
    /// numbered nor receipts.
    static func changes(_ event: EventFacts, recipients: [String]) -> [(uid: String, change: Change)] {
        guard event.conversationId != nil else { return [] }
        let seq = event.seq
        switch event.kind {
        case .messageRead(let uid, let readSeq):
            return [(uid, .read(seq: readSeq))]
        case .messageSent where seq != nil:
            let sender = event.actor
            return recipients.map { ($0, $0 == sender ? .sent(seq: seq!) : .arrived(seq: seq!)) }
        case .messageSent, .conversationDeleted, .conversationUndeleted:
            return recipients.map { ($0, .changed) }
        case .messageDeleted(let sender):
            // It may have been unread for anyone but its sender.
            return recipients.compactMap { $0 == sender ? passed($0, seq) : ($0, .changed) }
        case .participantRemoved(let uid):
            return [(uid, .changed)] + recipients.compactMap { $0 == uid ? nil : passed($0, seq) }
        default:
            guard let seq else { return [] }
            return recipients.map { ($0, .passed(seq: seq)) }
        }
    }

    private static func passed(_ uid: String, _ seq: Int64?) -> (uid: String, change: Change)? {
        seq.map { (uid, .passed(seq: $0)) }
    }

    /// A published event: moves the ledgers of the users whose counts it changes, or records them to be read; but
    /// for the users whose counts were read with its batch (`countedWithBatch`: that read counted it). Returns whether
    /// a user is due now: the publisher then pushes at the batch's end (``pushDue(into:)``).
    func published(_ event: EventFacts, recipients: [String], countedWithBatch pushed: Set<UserKey>) -> Bool {
        guard let conversationId = event.conversationId else { return false }
        let changes = Self.changes(event, recipients: recipients)
        guard !changes.isEmpty else { return false }
        var observed: [(UserKey, Change, connected: Bool)] = []
        observed.reserveCapacity(changes.count)
        for (uid, change) in changes {
            let key = UserKey(appId: event.appId, uid: uid)
            // Counted by the read that went out with the batch.
            guard !pushed.contains(key) else { continue }
            if case .passed = change {
                observed.append((key, change, true))
            } else {
                observed.append((key, change, hub.hasConnections(key)))
            }
        }
        guard !observed.isEmpty else { return false }
        let now = time.timeline.now()
        return state.withLockedValue { state -> Bool in
            var ready = false
            for (key, change, connected) in observed {
                if case .passed = change, state.users.isEmpty { continue }
                ready = state.observe(key, conversationId, change, connected: connected, now: now) || ready
            }
            return ready
        }
    }

    /// At the end of a batch whose events made users due (``published(_:recipients:countedWithBatch:)``): pushes,
    /// in the batch's flush, the users whose ledger moved and who need no read, from their budgets (held at once when
    /// the batch made more than ``maxUsersForBurst`` of them due); the users to read are left to the notifier's task.
    func pushDue(into wakeUps: inout WakeUps) {
        let now = time.timeline.now()
        let (pushes, held, toRead) = state.withLockedValue {
            $0.takeMoved(now: now, interval: interval, burst: burst, maxUsersForBurst: maxUsersForBurst)
        }
        for key in held { holds.schedule(key) }
        send(pushes, into: &wakeUps)
        if toRead { wakeUp.signal() }
    }

    func run() async throws {
        await cancelWhenGracefulShutdown { [self] in
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await self.holds.run { self.holdEnded($0) } }
                while !Task.isCancelled {
                    let (batch, pushes) = takeBatch()
                    var wakeUps = WakeUps()
                    send(pushes, into: &wakeUps)
                    wakeUps.run()
                    if batch.isEmpty {
                        if pushes.isEmpty { await wakeUp.wait(orUntil: nil, on: time.timeline) }
                    } else {
                        // A few hundred users per read transaction, then the thread is let go: the first pushes after
                        // a start (every user read whole) do not hold one of the few pool threads for a second.
                        for start in stride(from: 0, to: batch.count, by: Self.usersPerRead) {
                            await push(Array(batch[start..<min(start + Self.usersPerRead, batch.count)]))
                            await Task.yield()
                        }
                    }
                }
                group.cancelAll()
            }
        }
    }

    /// A user's interval ended: changes made meanwhile are pushed now.
    private func holdEnded(_ key: UserKey) {
        let wake = state.withLockedValue { state -> Bool in
            guard state.release(key) else { return false }
            state.ready.append(key)
            return true
        }
        if wake { wakeUp.signal() }
    }

    /// Takes the users to push now (``State/take(now:interval:burst:)``) and starts the intervals of those it held.
    private func takeBatch() -> (reads: [UnreadRequest], pushes: [(UserKey, UnreadSummary)]) {
        let now = time.timeline.now()
        let taken = state.withLockedValue { $0.take(now: now, interval: interval, burst: burst) }
        for key in taken.held { holds.schedule(key) }
        return (taken.reads, taken.pushes)
    }

    /// Reads the counts of a batch of users and pushes them to their connections here (every node computes the
    /// counts of its own users, see ``EventPublisher``).
    private func push(_ batch: [UnreadRequest]) async {
        do {
            var summaries: [UnreadSummary] = []
            if let inlineReads {
                summaries = try inlineReads.unread(batch)
            } else {
                summaries = try await store.unread(batch)
            }
            var wakeUps = WakeUps()
            deliver(Array(zip(batch, summaries)), into: &wakeUps)
            wakeUps.run()
        } catch {
            // Their changes are not recorded again: the next change pushes the user, with every conversation read.
            logger.warning("Unread counts unavailable", metadata: ["error": "\(error)"])
            state.withLockedValue { state in
                for request in batch { state.users[UserKey(appId: request.appId, uid: request.uid)]?.ledger = nil }
            }
        }
    }

    /// Moves the users' ledgers by what was read and pushes the counts to their connections here; a user whose total is
    /// not known is read whole again.
    private func deliver(_ reads: [(UnreadRequest, UnreadSummary)], into wakeUps: inout WakeUps) {
        let now = time.timeline.now()
        let (pushes, wake) = state.withLockedValue { state -> ([(UserKey, UnreadSummary)], Bool) in
            var pushes: [(UserKey, UnreadSummary)] = []
            var unknown: [UnreadRequest] = []
            for (request, read) in reads {
                let key = UserKey(appId: request.appId, uid: request.uid)
                if let summary = state.apply(request, read, for: key, now: now) {
                    pushes.append((key, summary))
                } else {
                    unknown.append(request)
                }
            }
            return (pushes, !unknown.isEmpty && state.rereadWhole(unknown))
        }
        if wake { wakeUp.signal() }
        send(pushes, into: &wakeUps)
    }

    /// Pushes counts to the users' connections here.
    private func send(_ pushes: [(UserKey, UnreadSummary)], into wakeUps: inout WakeUps) {
        guard !pushes.isEmpty else { return }
        let timestamp = time.epochMilliseconds()
        for (key, summary) in pushes {
            guard
                let json = EphemeralEvents.json(
                    appId: key.appId, actor: nil, timestamp: timestamp, payload: .unreadUpdated(summary)
                )
            else { continue }
            hub.deliver(FrameEncoding.eventFrame(json: json), to: key, into: &wakeUps)
        }
    }
}
