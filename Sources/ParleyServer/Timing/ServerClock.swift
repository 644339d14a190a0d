import Crypto
import Foundation
import NIOConcurrencyHelpers
import ParleyProtocol

/// The server's time: a ``Timeline`` on the injected clock for its timers, and epoch timestamps derived from it
/// (the wall clock at start plus the time elapsed on the timeline), so that a test's virtual clock moves both.
struct ServerClock: Sendable {
    let timeline: Timeline
    let epochAtStart: Int64

    init(timeline: Timeline, epochAtStart: Int64 = wallClockMilliseconds()) {
        self.timeline = timeline
        self.epochAtStart = epochAtStart
    }

    /// Now, as Unix epoch milliseconds.
    func epochMilliseconds() -> Int64 {
        epochAtStart + timeline.now().wholeMilliseconds
    }
}
