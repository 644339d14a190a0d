import Dispatch
import Foundation
import NIOConcurrencyHelpers
import Parley
import ParleyProtocol
import ParleyTesting
import Testing

/// The listener rules of docs/SDK.md, proven against a live server: every listener gets every event, on the queue the
/// settings name; a removed listener gets nothing more; the Builder's default connection mode is auto.
@Suite(.timeLimit(.minutes(3))) struct ListenerTests {
    /// Records events and whether each arrived on the queue with `key` set.
    final class QueueCheckingListener: ParleyEventListener {
        let key: DispatchSpecificKey<String>
        private let seen = NIOLockedValueBox<[(Event, Bool)]>([])

        init(key: DispatchSpecificKey<String>) { self.key = key }

        func onMessageSent(_ message: Message, event: Event) {
            let onQueue = DispatchQueue.getSpecific(key: key) == "callbacks"
            seen.withLockedValue { $0.append((event, onQueue)) }
        }

        var messages: [(Event, Bool)] { seen.withLockedValue { $0 } }
    }

    @Test func everyListenerGetsEveryEventOnTheChosenQueueUntilRemoved() async throws {
        let server = try await TestServer.start()
        let key = DispatchSpecificKey<String>()
        let queue = DispatchQueue(label: "test.callbacks")
        queue.setSpecific(key: key, value: "callbacks")
        let settings = AppSettings.Builder()
            .serverURL(server.baseURL)
            .storageDirectory(try TemporaryDirectory(prefix: "parley-listeners").url)
            .callbackQueue(queue)
            .appLifecycle(nil)
            .networkReachability(nil)
            .build()
        let bob = try ParleyClient(appId: server.app.appId, settings: settings)
        try await bob.start()
        try await bob.login(uid: "bob", authKey: server.app.authKey)
        await bob.waitUntilConnected()
        let first = QueueCheckingListener(key: key)
        let second = RecordingListener()
        bob.addEventListener("first", first)
        bob.addEventListener("second", second)
        let alice = try await server.login("alice")
        let conversation = try await server.createConversation(token: alice, type: .direct, with: ["bob"])
        func send(_ text: String) async throws {
            let answer = try await server.request(
                "POST", "/v1/conversations/\(conversation.id)/messages", token: alice,
                body: SendMessageRequest(parts: [.text(text)])
            )
            #expect(answer.status == 201)
        }

        try await send("one")
        let one = await second.next { $0.payload.message?.text == "one" }
        #expect(one?.appId == server.app.appId)
        // Both listeners are called in one block on the callback queue: once the second has it, so has the first.
        await withCheckedContinuation { continuation in queue.async { continuation.resume() } }
        #expect(first.messages.map { $0.0.payload.message?.text } == ["one"])
        #expect(first.messages.allSatisfy { $0.1 }, "a listener was called off the settings' callback queue")

        bob.removeEventListener("first")
        try await send("two")
        _ = await second.next { $0.payload.message?.text == "two" }
        await withCheckedContinuation { continuation in queue.async { continuation.resume() } }
        #expect(first.messages.map { $0.0.payload.message?.text } == ["one"], "a removed listener still receives")
        #expect(second.everyEventCalledItsMethod)
        await bob.shutdown()
        try await server.stop()
    }

    /// A view model on the main actor listens with its methods on the main actor: a `@preconcurrency` conformance, no
    /// `nonisolated`, no `MainActor.assumeIsolated` (Swift checks each call's isolation at run time). The callback
    /// queue is the main queue: the default on Apple platforms, set here as Linux's default is a private queue.
    @MainActor final class InboxViewModel {
        var texts: [String] = []
        var status: ConnectionStatus?
    }

    @MainActor @Test func aMainActorTypeListensWithoutWorkarounds() async throws {
        let server = try await TestServer.start()
        var settings = try testSettings(server: server)
        settings.callbackQueue = .main
        let bob = try ParleyClient(appId: server.app.appId, settings: settings)
        try await bob.start()
        try await bob.login(uid: "bob", authKey: server.app.authKey)
        let model = InboxViewModel()
        bob.addEventListener("inbox", model)
        bob.addConnectionListener("banner", model)
        await bob.waitUntilConnected()
        let alice = try await server.login("alice")
        let conversation = try await server.createConversation(token: alice, type: .direct, with: ["bob"])
        let answer = try await server.request(
            "POST", "/v1/conversations/\(conversation.id)/messages", token: alice,
            body: SendMessageRequest(parts: [.text("to the main actor")])
        )
        #expect(answer.status == 201)
        let deadline = ContinuousClock.now + .seconds(10)
        while model.texts.isEmpty && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(model.texts == ["to the main actor"])
        #expect(model.status == .connected)
        await bob.shutdown()
        try await server.stop()
    }

    @Test func theBuildersDefaultConnectsBySelf() {
        let settings = AppSettings.Builder().build()
        #expect(settings.autoEstablishSocketConnection)
    }
}

extension ListenerTests.InboxViewModel: @preconcurrency ParleyEventListener, @preconcurrency ConnectionListener {
    func onMessageSent(_ message: Message, event: Event) { texts.append(message.text) }
    func onStatusChanged(_ status: ConnectionStatus) { self.status = status }
}
