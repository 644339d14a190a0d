import Foundation
import Logging
@_spi(Testing) import Parley

/// A raw WebSocket client for protocol tests: sends any text, reads frames one by one, reports the close code.
public actor WebSocketProbe {
    private let connection: any TransportConnection
    private var iterator: AsyncStream<TransportEvent>.AsyncIterator
    /// How the connection ended, once it has.
    public private(set) var ending: (code: UInt16?, reason: String?)?

    /// Whether the probe sends the `connect` frame by itself as soon as the socket opens.
    private let handshake: Bool
    /// The `resume` of that `connect` frame.
    private let resume: ResumeRequest?
    /// Whether the first `caughtUp` frame is read past (tests of live traffic do not care for it).
    private var skipsCaughtUp: Bool
    /// Frames sent right after `connect`, without waiting for `hello`.
    private let afterConnect: [String]
    /// The `token` of that `connect` frame.
    private let connectToken: String?

    /// Opens a connection to `url` with `Authorization: Bearer <token>`; with `handshake`, sends `connect` first,
    /// as every client must, with `resume` in it, then `afterConnect` without waiting for `hello`. Unless
    /// `skipCaughtUp` is false, the `caughtUp` frame that ends the replay is not returned. An empty `token` sends no
    /// `Authorization` header; `connectToken` goes in the `connect` frame (as a browser authenticates).
    public init(
        url: String, token: String, handshake: Bool = true, resume: ResumeRequest? = nil, skipCaughtUp: Bool = true,
        afterConnect: [String] = [], connectToken: String? = nil
    ) {
        // The SDK's transport of the platform: SwiftNIO's on Linux, URLSession's on Apple platforms.
        #if canImport(Darwin)
            connection = URLSessionWebSocketTransport().open(url: url, authToken: token)
        #else
            connection = WSClientTransport(logger: Logger(label: "parley.probe")).open(url: url, authToken: token)
        #endif
        iterator = connection.events.makeAsyncIterator()
        self.handshake = handshake
        self.resume = resume
        self.skipsCaughtUp = skipCaughtUp
        self.afterConnect = afterConnect
        self.connectToken = connectToken
    }

    public func send(_ text: String) {
        connection.send(text)
    }

    public func send(_ frame: ClientFrame) throws {
        connection.send(String(decoding: try WireCoding.encode(frame), as: UTF8.self))
    }

    /// The next text frame; nil once the connection has ended.
    public func nextText() async -> String? {
        guard ending == nil else { return nil }
        var events = iterator
        let event = await events.next(isolation: self)
        iterator = events
        switch event {
        case .opened:
            if handshake {
                try? send(.connect(ConnectFrame(resume: resume, token: connectToken)))
                for text in afterConnect { send(text) }
            }
            return await nextText()
        case .text(let text):
            if skipsCaughtUp, case .caughtUp = try? WireCoding.decode(ServerFrame.self, from: Array(text.utf8)) {
                skipsCaughtUp = false
                return await nextText()
            }
            return text
        case .closed(let code, let reason):
            ending = (code, reason)
            return nil
        case .failed:
            ending = (nil, nil)
            return nil
        case .none:
            if ending == nil { ending = (nil, nil) }
            return nil
        }
    }

    /// The next frame, decoded; throws when the connection ended first.
    public func nextFrame() async throws -> ServerFrame {
        guard let text = await nextText() else { throw ProbeError.connectionEnded(code: ending?.code) }
        return try WireCoding.decode(ServerFrame.self, from: Array(text.utf8))
    }

    /// Reads past frames until one satisfies `matches`; returns it.
    public func nextFrame(where matches: (ServerFrame) -> Bool) async throws -> ServerFrame {
        while true {
            let frame = try await nextFrame()
            if matches(frame) { return frame }
        }
    }

    /// Reads until the connection ends; returns the server's close code and reason.
    public func closure() async -> (code: UInt16?, reason: String?) {
        while await nextText() != nil {}
        return ending ?? (nil, nil)
    }

    /// Starts closing from this side.
    public func close(code: UInt16 = 1000) {
        connection.close(code: code)
    }
}

public enum ProbeError: Error {
    case connectionEnded(code: UInt16?)
}
