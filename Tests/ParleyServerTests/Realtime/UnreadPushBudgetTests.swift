import Testing

@testable import ParleyServer

/// The budget behind `unread.update` pushes: `burst` in a row, then one per interval.
@Suite struct UnreadPushBudgetTests {
    let interval = Duration.seconds(1)
    let burst = 5

    func fullBudget(at now: Duration) -> UnreadNotifier.PushBudget {
        UnreadNotifier.PushBudget(credit: interval * burst, last: now)
    }

    @Test func aBurstOfPushesSpendsTheBudgetOnlyAtItsLast() {
        var budget = fullBudget(at: .zero)
        let spent = (1...burst).map { _ in budget.spend(now: .milliseconds(10), interval: interval, burst: burst) }
        #expect(spent == [false, false, false, false, true])
    }

    @Test func anIntervalEarnsExactlyOnePushBack() {
        var budget = fullBudget(at: .zero)
        for _ in 1...burst { _ = budget.spend(now: .zero, interval: interval, burst: burst) }
        // The interval's end (the hold's) earns one push, and only one.
        let atTheEnd = budget.spend(now: interval, interval: interval, burst: burst)
        #expect(atTheEnd)
        // Two quiet intervals earn two.
        let afterTwo = (1...2).map { _ in budget.spend(now: interval * 3, interval: interval, burst: burst) }
        #expect(afterTwo == [false, true])
    }

    @Test func aQuietUserNeverSavesMoreThanTheBurst() {
        var budget = fullBudget(at: .zero)
        _ = budget.spend(now: .zero, interval: interval, burst: burst)
        #expect(budget.isFull(now: .seconds(1), interval: interval, burst: burst))
        let spent = (1...burst).map { _ in budget.spend(now: .seconds(3600), interval: interval, burst: burst) }
        #expect(spent == [false, false, false, false, true])
    }

    @Test func budgetsWholeAgainAreDropped() {
        // Every push of a burst of 1 (PostgreSQL) holds its user: the budgets must not pile up, one per user ever pushed.
        var state = UnreadNotifier.State()
        for index in 0..<1000 {
            _ = state.push(
                UnreadNotifier.UserKey(appId: "a", uid: "u\(index)"), now: .seconds(1), interval: interval, burst: 1,
                bursting: false)
        }
        #expect(state.users.values.filter { $0.budget != nil }.count == 1000)
        _ = state.push(
            UnreadNotifier.UserKey(appId: "a", uid: "later"), now: .seconds(60), interval: interval, burst: 1,
            bursting: false)
        #expect(state.users.values.filter { $0.budget != nil }.count == 1)
        // A sweep keeps a budget not whole yet: spent a second before it, it would earn back one push, not five.
        var busy = UnreadNotifier.State()
        let other = UnreadNotifier.UserKey(appId: "a", uid: "other")
        let user = UnreadNotifier.UserKey(appId: "a", uid: "busy")
        _ = busy.push(other, now: .seconds(100), interval: interval, burst: burst)
        for _ in 1...burst { _ = busy.push(user, now: .seconds(119), interval: interval, burst: burst) }
        _ = busy.push(other, now: .seconds(120), interval: interval, burst: burst, bursting: false)
        #expect(busy.users.values.filter { $0.budget != nil }.count == 2)
        #expect(busy.users[user]?.budget?.credit == .zero)
    }

    @Test func aBurstOfOneIsOnePushPerInterval() {
        var budget = UnreadNotifier.PushBudget(credit: interval, last: .zero)
        let spent = [Duration.zero, interval, interval * 5].map { budget.spend(now: $0, interval: interval, burst: 1) }
        #expect(spent == [true, true, true])
    }
}
