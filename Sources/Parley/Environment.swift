import Foundation
import NIOConcurrencyHelpers

/// Whether the app is in the foreground or the background.
public enum AppLifecycleState: Sendable, Hashable {
    /// The app is active on screen.
    case foreground
    /// The app is in the background (auto mode closes the socket).
    case background
}

/// Where the SDK learns the app's lifecycle. On iOS the default is `UIApplicationLifecycle`; elsewhere there is
/// none (the app counts as in the foreground) unless the app passes one, such as ``ManualAppLifecycle``.
public protocol AppLifecycleSource: Sendable {
    /// Every change of state from now on.
    func states() -> AsyncStream<AppLifecycleState>
}

/// Where the SDK learns whether the device has a network. On Apple platforms the default is
/// `NWPathReachability`; elsewhere there is none (the network counts as available) unless the app passes one,
/// such as ``ManualReachability``.
public protocol NetworkReachabilitySource: Sendable {
    /// Whether the network is available: the current value (when known), then every change.
    func availability() -> AsyncStream<Bool>
}

/// A lifecycle the app (or the `parley` CLI, or a test) drives by hand.
public final class ManualAppLifecycle: AppLifecycleSource {
    private let subscribers = Subscribers<AppLifecycleState>()

    /// A source that reports nothing until ``set(_:)`` is called (the client counts as in the foreground).
    public init() {}

    /// Reports a new state to every client using this source.
    public func set(_ state: AppLifecycleState) { subscribers.yield(state) }

    public func states() -> AsyncStream<AppLifecycleState> { subscribers.stream() }
}

/// Reachability the app (or the CLI, or a test) drives by hand.
public final class ManualReachability: NetworkReachabilitySource {
    private let subscribers = Subscribers<Bool>()

    /// A source that reports nothing until ``set(available:)`` is called (the network counts as available).
    public init() {}

    /// Reports whether the network is available.
    public func set(available: Bool) { subscribers.yield(available) }

    public func availability() -> AsyncStream<Bool> { subscribers.stream() }
}

/// Opens links for ``ParleyClient/openLink(_:)``: the system's on iOS (`UIApplicationLinkOpener`) and macOS
/// (`WorkspaceLinkOpener`); none on Linux unless the app passes one.
public protocol LinkOpener: Sendable {
    /// Opens `url`; whether it could.
    func open(_ url: URL) async -> Bool
}

/// The APNs token given to the static ``ParleyClient/setDeviceToken(_:environment:)``, for every client of the
/// process (``shared``): the latest one, and its changes. Tests make centers of their own, so that a token one test
/// sets reaches only its own clients.
@_spi(Testing) public final class DeviceTokenCenter: Sendable {
    struct Token: Sendable, Hashable {
        var hex: String
        var environment: PushEnvironment
    }

    /// The process's center: the static `setDeviceToken` writes here, and clients follow it unless their settings
    /// name another.
    public static let shared = DeviceTokenCenter()

    private let state = NIOLockedValueBox<Token?>(nil)
    private let subscribers = Subscribers<Token>()

    /// A center of its own, without a token (a test's).
    public init() {}

    var latest: Token? { state.withLockedValue { $0 } }

    func set(_ token: Token) {
        state.withLockedValue { $0 = token }
        subscribers.yield(token)
    }

    /// Every token set from now on.
    func changes() -> AsyncStream<Token> { subscribers.stream() }
}

/// Fans values out to any number of `AsyncStream`s.
final class Subscribers<Value: Sendable>: Sendable {
    private let continuations = NIOLockedValueBox([UUID: AsyncStream<Value>.Continuation]())

    func stream() -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream.makeStream(of: Value.self)
        let key = UUID()
        continuation.onTermination = { [weak self] _ in
            _ = self?.continuations.withLockedValue { $0.removeValue(forKey: key) }
        }
        continuations.withLockedValue { $0[key] = continuation }
        return stream
    }

    func yield(_ value: Value) {
        for continuation in continuations.withLockedValue({ Array($0.values) }) { continuation.yield(value) }
    }
}

#if canImport(UIKit) && !os(watchOS)
    import UIKit

    /// The app's lifecycle from UIKit's notifications (`didEnterBackground`, `willEnterForeground`).
    public struct UIApplicationLifecycle: AppLifecycleSource {
        /// A source over `UIApplication`'s notifications.
        public init() {}

        public func states() -> AsyncStream<AppLifecycleState> {
            AsyncStream { continuation in
                let center = NotificationCenter.default
                let observers = ObserverTokens(
                    center: center,
                    tokens: [
                        center.addObserver(
                            forName: UIApplication.didEnterBackgroundNotification, object: nil, queue: nil
                        ) { _ in
                            continuation.yield(.background)
                        },
                        center.addObserver(
                            forName: UIApplication.willEnterForegroundNotification, object: nil, queue: nil
                        ) { _ in
                            continuation.yield(.foreground)
                        },
                    ])
                continuation.onTermination = { _ in observers.remove() }
            }
        }
    }

    /// Opens links with `UIApplication.open(_:)`.
    public struct UIApplicationLinkOpener: LinkOpener {
        /// An opener over `UIApplication.shared`.
        public init() {}

        public func open(_ url: URL) async -> Bool {
            await MainActor.run {
                guard UIApplication.shared.canOpenURL(url) else { return false }
                UIApplication.shared.open(url, options: [:], completionHandler: nil)
                return true
            }
        }
    }

    /// Notification observer tokens, removed together.
    ///
    /// `@unchecked Sendable` is sound: the tokens are set once in `init` and never mutated, and
    /// `NotificationCenter.removeObserver(_:)` may be called from any thread.
    private final class ObserverTokens: @unchecked Sendable {
        let center: NotificationCenter
        let tokens: [any NSObjectProtocol]
        init(center: NotificationCenter, tokens: [any NSObjectProtocol]) {
            self.center = center
            self.tokens = tokens
        }
        func remove() { tokens.forEach(center.removeObserver) }
    }
#endif

#if canImport(AppKit) && !targetEnvironment(macCatalyst)
    import AppKit

    /// Opens links with `NSWorkspace`.
    public struct WorkspaceLinkOpener: LinkOpener {
        /// An opener over `NSWorkspace.shared`.
        public init() {}

        public func open(_ url: URL) async -> Bool {
            await MainActor.run { NSWorkspace.shared.open(url) }
        }
    }
#endif

#if canImport(Network)
    import Network

    /// Reachability from `NWPathMonitor`: available while the path is satisfied.
    public struct NWPathReachability: NetworkReachabilitySource {
        /// A source that starts a path monitor for each stream it gives.
        public init() {}

        public func availability() -> AsyncStream<Bool> {
            AsyncStream { continuation in
                let monitor = NWPathMonitor()
                monitor.pathUpdateHandler = { path in continuation.yield(path.status == .satisfied) }
                monitor.start(queue: DispatchQueue(label: "parley.reachability"))
                continuation.onTermination = { _ in monitor.cancel() }
            }
        }
    }
#endif
