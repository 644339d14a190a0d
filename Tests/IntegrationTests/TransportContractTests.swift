import Foundation
import Logging
import NIOConcurrencyHelpers
@_spi(Testing) import Parley
import ParleyProtocol
import ParleyTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The transports' shared contract (docs/SDK.md, "Transports"), on a live server: a client connects, receives live
/// events, sends over the socket, hears the server's close code (a revoked token: 4001, no retry) and disconnects.
/// ``URLSessionWebSocketTransport`` runs here through its seam, over a real WebSocket of SwiftNIO's (libcurl, under
/// URLSession on Linux, has no WebSocket): everything but the system task itself is exercised.
@Suite(.timeLimit(.minutes(3))) struct TransportContractTests {
    enum Kind: String, CaseIterable, Sendable {
        case nio
        case urlSession
    }

    static func transport(_ kind: Kind) -> any WebSocketTransport {
        #if canImport(Darwin)
            // Apple platforms: URLSession's own WebSocket, for both (the SDK does not link SwiftNIO's there).
            return URLSessionWebSocketTransport()
        #else
            switch kind {
            case .nio: return WSClientTransport(logger: Logger(label: "test"))
            case .urlSession:
                return URLSessionWebSocketTransport { request, observer in SeamOverNIO(request, observer) }
            }
        #endif
    }

    @Test(arguments: Kind.allCases) func aClientConnectsReceivesSendsAndHearsTheServersCloseCode(_ kind: Kind)
        async throws
    {
        let server = try await TestServer.start()
        var settings = try testSettings(server: server)
        settings.webSocketTransport = Self.transport(kind)
        let bob = try ParleyClient(appId: server.app.appId, settings: settings)
        let recorder = RecordingListener()
        bob.addEventListener("recorder", recorder)
        try await bob.start()
        try await bob.login(uid: "bob", authKey: server.app.authKey)
        await bob.waitUntilConnected()

        let alice = try await server.login("alice")
        let conversation = try await server.createConversation(token: alice, type: .direct, with: ["bob"])
        _ = try await server.request(
            "POST", "/v1/conversations/\(conversation.id)/messages", token: alice,
            body: SendMessageRequest(parts: [.text("hello bob")])
        )
        let received = await recorder.next { $0.payload.message?.text == "hello bob" }
        #expect(received?.appId == server.app.appId)
        let sent = try await bob.sendTextMessage("hello alice", to: .conversation(conversation.id))
        #expect(sent.sender == "bob" && sent.seq > 0)

        // The server closes with 4001 when the token is revoked: the client stops, without retrying.
        let admin = ParleyAdmin(serverURL: server.baseURL, restAPIKey: server.app.restAPIKey)
        try await admin.revokeAllAuthTokens(uid: "bob")
        let status = await bob.waitForStatus { if case .failed = $0 { true } else { false } }
        guard case .failed(let error) = status else { throw TransportContractError.unexpected("\(status)") }
        #expect(error.code == .authTokenInvalid && error.status == 4001, "\(kind): \(error)")
        await bob.shutdown()
        try await server.stop()
    }

    @Test(arguments: Kind.allCases) func aClientThatDisconnectsClosesItsSocket(_ kind: Kind) async throws {
        let server = try await TestServer.start()
        var settings = try testSettings(server: server, autoConnect: false)
        settings.webSocketTransport = Self.transport(kind)
        let client = try ParleyClient(appId: server.app.appId, settings: settings)
        try await client.start()
        try await client.login(uid: "carol", authKey: server.app.authKey)
        try await client.connect()
        #expect(client.connectionStatus == .connected)
        await client.disconnect()
        #expect(client.connectionStatus == .disconnected)
        // The server saw the socket go.
        let deadline = ContinuousClock.now + .seconds(5)
        while await server.snapshot().webSockets > 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(await server.snapshot().webSockets == 0)
        await client.shutdown()
        try await server.stop()
    }
}

enum TransportContractError: Error {
    case unexpected(String)
}

#if !canImport(Darwin)
    /// ``WebSocketTaskSeam`` over SwiftNIO's WebSocket client: what `URLSessionWebSocketTask` does, where URLSession
    /// cannot (messages buffered until read, the close frame kept, the delegate's calls made).
    final class SeamOverNIO: WebSocketTaskSeam {
        private struct State {
            var connection: (any TransportConnection)?
            var buffered: [String] = []
            var waiting: [@Sendable (Result<String?, any Error>) -> Void] = []
            var ended: (any Error)?
            var closeFrame: (code: UInt16, reason: String?)?
        }

        private let state = NIOLockedValueBox(State())
        private let request: URLRequest
        private let observer: WebSocketTaskObserver

        init(_ request: URLRequest, _ observer: WebSocketTaskObserver) {
            self.request = request
            self.observer = observer
        }

        struct Ended: Error {}

        func start() {
            let token = request.value(forHTTPHeaderField: "Authorization").map { String($0.dropFirst("Bearer ".count)) }
            let connection = WSClientTransport(logger: Logger(label: "seam")).open(
                url: request.url!.absoluteString, authToken: token ?? ""
            )
            state.withLockedValue { $0.connection = connection }
            Task {
                for await event in connection.events {
                    switch event {
                    case .opened:
                        observer.didOpen()
                    case .text(let text):
                        let waiter = state.withLockedValue {
                            state -> (@Sendable (Result<String?, any Error>) -> Void)? in
                            if state.waiting.isEmpty {
                                state.buffered.append(text)
                                return nil
                            }
                            return state.waiting.removeFirst()
                        }
                        waiter?(.success(text))
                    case .closed(let code, let reason):
                        // As URLSession: the close frame is on the task before the pending read fails.
                        if let code { state.withLockedValue { $0.closeFrame = (code, reason) } }
                        fail(Ended())
                        observer.didClose(code: code, reason: reason)
                    case .failed(let error):
                        fail(error)
                        observer.didComplete(error: error)
                    }
                }
            }
        }

        private func fail(_ error: any Error) {
            let waiting = state.withLockedValue { state in
                state.ended = error
                defer { state.waiting = [] }
                return state.waiting
            }
            for waiter in waiting { waiter(.failure(error)) }
        }

        func send(text: String, completion: @escaping @Sendable ((any Error)?) -> Void) {
            state.withLockedValue { $0.connection }?.send(text)
            completion(nil)
        }

        func receive(completion: @escaping @Sendable (Result<String?, any Error>) -> Void) {
            let ready = state.withLockedValue { state -> Result<String?, any Error>? in
                if !state.buffered.isEmpty { return .success(state.buffered.removeFirst()) }
                if let ended = state.ended { return .failure(ended) }
                state.waiting.append(completion)
                return nil
            }
            if let ready { completion(ready) }
        }

        func cancel(code: UInt16) {
            state.withLockedValue { $0.connection }?.close(code: code)
        }

        var closeFrame: (code: UInt16, reason: String?)? { state.withLockedValue { $0.closeFrame } }
    }
#endif
