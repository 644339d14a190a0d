import Testing

@testable import Parley

/// When the SDK holds background time (docs/SDK.md, "Background time").
@Suite struct BackgroundTimeRuleTests {
    @Test func timeIsHeldFromTheBackgroundUntilTheWorkIsDone() {
        var rule = BackgroundTimeRule()
        #expect(rule.workChanged(true).isEmpty)  // work in the foreground needs no time
        #expect(rule.appEnteredBackground() == [.begin])
        #expect(rule.workChanged(true).isEmpty)
        #expect(rule.workChanged(false) == [.end])
        #expect(rule.workChanged(true) == [.begin])  // new work while still in the background
        #expect(rule.appEnteredForeground() == [.end])
    }

    @Test func noWorkNoTime() {
        var rule = BackgroundTimeRule()
        #expect(rule.appEnteredBackground().isEmpty)
        #expect(rule.appEnteredForeground().isEmpty)
        #expect(!rule.holding)
    }

    @Test func timeTheSystemTookBackIsNotAskedForAgainBeforeTheNextBackground() {
        var rule = BackgroundTimeRule()
        _ = rule.workChanged(true)
        #expect(rule.appEnteredBackground() == [.begin])
        #expect(rule.timeExpired() == [.end])
        #expect(rule.workChanged(false).isEmpty)
        #expect(rule.workChanged(true).isEmpty)
        #expect(rule.appEnteredForeground().isEmpty)
        #expect(rule.appEnteredBackground() == [.begin])
    }

    @Test func anExpirationAfterTheTimeEndedChangesNothing() {
        var rule = BackgroundTimeRule()
        _ = rule.workChanged(true)
        _ = rule.appEnteredBackground()
        #expect(rule.workChanged(false) == [.end])
        #expect(rule.timeExpired().isEmpty)
        // This stay's expiration still counts: new work waits for the next background.
        #expect(rule.workChanged(true).isEmpty)
    }
}
