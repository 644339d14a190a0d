import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A TCP proxy on 127.0.0.1 that a test controls, to put faults between a client and the server.
///
/// - ``cutAll()``: resets every open connection (both sides see the connection die).
/// - ``stall(_:)``: silently drops every byte in both directions, connections stay open (a half-open network:
///   only a heartbeat notices).
/// - ``refuse(_:)``: closes new connections as soon as they are accepted.
/// - ``cutRandomly(seed:bytes:)``: resets each new connection after a random number of forwarded bytes, wherever
///   that falls (in the middle of a frame, too); the numbers come from a seeded generator, so a run is repeatable.
public final class TCPProxy: Sendable {
    /// The port clients connect to.
    public let port: Int
    private let listener: any Channel
    private let state: NIOLockedValueBox<ProxyState>

    struct ProxyState {
        var stalled = false
        var refusing = false
        var open: [ObjectIdentifier: any Channel] = [:]
        var accepted = 0
        var refused = 0
        /// Byte budgets of new connections, when cutting at random.
        var cuts: (generator: SeededGenerator, bytes: ClosedRange<Int>)?
        var cutCount = 0
    }

    private init(port: Int, listener: any Channel, state: NIOLockedValueBox<ProxyState>) {
        self.port = port
        self.listener = listener
        self.state = state
    }

    /// Starts a proxy to `127.0.0.1:targetPort`.
    public static func start(targetPort: Int, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton)
        async throws -> TCPProxy
    {
        let state = NIOLockedValueBox(ProxyState())
        let listener = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.autoRead, value: false)
            .childChannelInitializer { inbound in
                let refuse = state.withLockedValue { state -> Bool in
                    state.accepted += 1
                    if state.refusing { state.refused += 1 }
                    return state.refusing
                }
                if refuse { return Self.reset(inbound) }
                return ClientBootstrap(group: inbound.eventLoop)
                    .channelOption(.autoRead, value: false)
                    .connect(host: "127.0.0.1", port: targetPort)
                    .flatMap { outbound in
                        Self.track(inbound, state: state)
                        Self.track(outbound, state: state)
                        let budget = state.withLockedValue { state -> Int? in
                            guard var cuts = state.cuts else { return nil }
                            defer { state.cuts = cuts }
                            return Int.random(in: cuts.bytes, using: &cuts.generator)
                        }
                        let pair = PairBudget(remaining: budget)
                        // Both channels live on the same event loop, where this runs.
                        do {
                            try inbound.pipeline.syncOperations.addHandler(
                                Forwarder(partner: outbound, state: state, budget: pair)
                            )
                            try outbound.pipeline.syncOperations.addHandler(
                                Forwarder(partner: inbound, state: state, budget: pair)
                            )
                        } catch {
                            return inbound.eventLoop.makeFailedFuture(error)
                        }
                        return inbound.setOption(.autoRead, value: true).and(outbound.setOption(.autoRead, value: true))
                            .map { _ in }
                    }
                    .flatMapError { _ in inbound.close() }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return TCPProxy(port: listener.localAddress?.port ?? 0, listener: listener, state: state)
    }

    private static func track(_ channel: any Channel, state: NIOLockedValueBox<ProxyState>) {
        let key = ObjectIdentifier(channel)
        state.withLockedValue { $0.open[key] = channel }
        channel.closeFuture.whenComplete { _ in _ = state.withLockedValue { $0.open.removeValue(forKey: key) } }
    }

    /// Drops (true) or forwards (false) every byte from now on.
    public func stall(_ stalled: Bool) {
        state.withLockedValue { $0.stalled = stalled }
    }

    /// Closes (true) or proxies (false) new connections.
    public func refuse(_ refusing: Bool) {
        state.withLockedValue { $0.refusing = refusing }
    }

    /// From now on, resets each new connection once `bytes` (drawn per connection from a generator seeded with
    /// `seed`) have gone through it in either direction; nil stops cutting.
    public func cutRandomly(seed: UInt64?, bytes: ClosedRange<Int> = 1_000...50_000) {
        state.withLockedValue { $0.cuts = seed.map { (SeededGenerator(seed: $0), bytes) } }
    }

    /// Connections cut by ``cutRandomly(seed:bytes:)`` so far.
    public var randomCuts: Int { state.withLockedValue { $0.cutCount } }

    /// Resets every open connection.
    public func cutAll() {
        for channel in state.withLockedValue({ Array($0.open.values) }) { _ = Self.reset(channel) }
    }

    /// Closes with a TCP reset (SO_LINGER 0), as a dropped network does, rather than an orderly FIN.
    fileprivate static func reset(_ channel: any Channel) -> EventLoopFuture<Void> {
        guard let provider = channel as? any SocketOptionProvider else { return channel.close() }
        return provider.setSoLinger(linger(l_onoff: 1, l_linger: 0)).flatMap { channel.close() }
    }

    /// Open proxied connections (each counts its two sides once).
    public var openConnections: Int { state.withLockedValue { $0.open.count / 2 } }
    /// Connections accepted so far, and how many of them were refused.
    public var acceptedConnections: Int { state.withLockedValue { $0.accepted } }
    public var refusedConnections: Int { state.withLockedValue { $0.refused } }

    /// Stops listening and resets every connection.
    public func stop() async throws {
        cutAll()
        try await listener.close()
    }
}

/// Copies what one side reads to its partner, unless the proxy is stalled; closes the partner when one side goes.
private final class Forwarder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    let partner: any Channel
    let state: NIOLockedValueBox<TCPProxy.ProxyState>
    let budget: PairBudget

    init(partner: any Channel, state: NIOLockedValueBox<TCPProxy.ProxyState>, budget: PairBudget) {
        self.partner = partner
        self.state = state
        self.budget = budget
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        guard !state.withLockedValue({ $0.stalled }) else { return }
        guard let remaining = budget.remaining else {
            partner.writeAndFlush(buffer, promise: nil)
            return
        }
        if buffer.readableBytes < remaining {
            budget.remaining = remaining - buffer.readableBytes
            partner.writeAndFlush(buffer, promise: nil)
            return
        }
        // The budget ends inside this read: forward up to it, then reset both sides.
        budget.remaining = 0
        if remaining > 0, let head = buffer.readSlice(length: remaining) { partner.writeAndFlush(head, promise: nil) }
        state.withLockedValue { $0.cutCount += 1 }
        _ = TCPProxy.reset(partner)
        _ = TCPProxy.reset(context.channel)
    }

    func channelInactive(context: ChannelHandlerContext) {
        partner.close(promise: nil)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

/// The bytes a proxied connection may still carry (both directions together); nil for no limit. Both forwarders of
/// a pair run on the same event loop, so they never touch it at the same time.
private final class PairBudget {
    var remaining: Int?
    init(remaining: Int?) { self.remaining = remaining }
}

/// SplitMix64: a small, fast generator whose sequence depends only on its seed (repeatable fault plans).
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
