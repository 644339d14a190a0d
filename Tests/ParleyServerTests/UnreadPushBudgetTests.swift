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

    @Test func aBurstOfOneIsOnePushPerInterval() {
        var budget = UnreadNotifier.PushBudget(credit: interval, last: .zero)
        let spent = [Duration.zero, interval, interval * 5].map { budget.spend(now: $0, interval: interval, burst: 1) }
        #expect(spent == [true, true, true])
    }
}
