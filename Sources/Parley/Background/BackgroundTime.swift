import Foundation

/// Where the SDK asks the system for time to finish its work after the app leaves the foreground: UIKit's background
/// tasks on iOS (`UIApplicationBackgroundTime`), none elsewhere. Tests give one that records what it is asked.
public protocol BackgroundTimeSource: Sendable {
    /// Asks for time to finish work; `expiration` is called when the system takes the time back (the SDK then ends
    /// it at once). Returns an identifier for ``end(_:)``, or nil when the system gave none.
    func begin(name: String, expiration: @escaping @Sendable () -> Void) async -> Int?
    /// Gives back the time asked for with ``begin(name:expiration:)``.
    func end(_ id: Int) async
}

/// When the SDK holds background time, as a pure state machine: from the moment the app leaves the foreground while
/// the outbox has work (a send or an upload not finished), until that work is done, the app is back, or the system
/// takes the time back (then not again before the next time the app leaves the foreground).
struct BackgroundTimeRule: Sendable, Hashable {
    enum Action: Sendable, Hashable {
        /// Ask the system for time.
        case begin
        /// Give it back.
        case end
    }

    private(set) var inBackground = false
    private(set) var hasWork = false
    private(set) var holding = false
    /// The system took the time back during this stay in the background.
    private(set) var expired = false

    mutating func appEnteredBackground() -> [Action] {
        inBackground = true
        return reconcile()
    }

    mutating func appEnteredForeground() -> [Action] {
        inBackground = false
        expired = false
        return reconcile()
    }

    /// The outbox has work (`true`) or none left (`false`).
    mutating func workChanged(_ hasWork: Bool) -> [Action] {
        self.hasWork = hasWork
        return reconcile()
    }

    /// The system took the time back (its expiration handler ran).
    mutating func timeExpired() -> [Action] {
        expired = true
        return reconcile()
    }

    private mutating func reconcile() -> [Action] {
        let wanted = inBackground && hasWork && !expired
        guard wanted != holding else { return [] }
        holding = wanted
        return [wanted ? .begin : .end]
    }
}

/// Runs ``BackgroundTimeRule`` against a ``BackgroundTimeSource``: feeds it the app's moves and the outbox's state, and
/// begins and ends the system's background task as it says.
actor BackgroundTimeKeeper {
    private var rule = BackgroundTimeRule()
    private let source: (any BackgroundTimeSource)?
    /// The time held: its identifier, and the number of the `begin` it came from (an expiration of an earlier one is
    /// ignored).
    private var held: (id: Int?, number: Int)?
    private var begins = 0

    init(source: (any BackgroundTimeSource)?) {
        self.source = source
    }

    func appEnteredBackground() async { await perform(rule.appEnteredBackground()) }

    func appEnteredForeground() async { await perform(rule.appEnteredForeground()) }

    func workChanged(_ hasWork: Bool) async {
        guard hasWork != rule.hasWork else { return }
        await perform(rule.workChanged(hasWork))
    }

    private func expired(number: Int) async {
        guard held?.number == number else { return }
        await perform(rule.timeExpired())
    }

    private func perform(_ actions: [BackgroundTimeRule.Action]) async {
        guard let source else { return }
        for action in actions {
            switch action {
            case .begin:
                begins += 1
                let number = begins
                held = (nil, number)
                let id = await source.begin(name: "Parley: sending") { [weak self] in
                    Task { await self?.expired(number: number) }
                }
                // An end may have come while the system answered: give the time back at once then.
                if held?.number == number {
                    held = (id, number)
                } else if let id {
                    await source.end(id)
                }
            case .end:
                let current = held
                held = nil
                if let id = current?.id { await source.end(id) }
            }
        }
    }
}

extension Outbox {
    /// Whether a send or an upload is not finished (pending; a failed one waits for the app).
    var hasWork: Bool { messages.contains { $0.state == .pending } }
}

#if canImport(UIKit) && !os(watchOS)
    import UIKit

    /// UIKit's background tasks (`beginBackgroundTask(withName:expirationHandler:)`): a few more seconds to finish
    /// the outbox's work after the app leaves the foreground.
    public struct UIApplicationBackgroundTime: BackgroundTimeSource {
        /// A source over `UIApplication.shared`.
        public init() {}

        public func begin(name: String, expiration: @escaping @Sendable () -> Void) async -> Int? {
            await MainActor.run {
                let id = UIApplication.shared.beginBackgroundTask(withName: name, expirationHandler: expiration)
                return id == .invalid ? nil : id.rawValue
            }
        }

        public func end(_ id: Int) async {
            await MainActor.run { UIApplication.shared.endBackgroundTask(UIBackgroundTaskIdentifier(rawValue: id)) }
        }
    }
#endif
