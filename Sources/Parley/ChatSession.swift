import Foundation
import NIOConcurrencyHelpers

/// One open chat: a conversation the user is looking at. Made by ``ParleyClient/openChat(conversationId:)``; at most
/// one is open at a time (opening another closes this one, and so do `deauthorizeUser()` and `logout()`).
///
/// ```swift
/// let chat = try client.openChat(conversationId: id)
/// if let draft = chat.takePrefill() { input.text = draft }
/// let page = try await chat.history()
/// for await event in chat.events() { ... }            // this conversation's live events
/// try await chat.send("Hello")
/// ```
///
/// Every method fails with `ERR_CHAT_NOT_OPENED` once the session is closed.
public final class ChatSession: Sendable {
    /// The conversation of this chat.
    public let conversationId: String
    /// Push notifications of this conversation that the app passed to
    /// `ParleyClient.handleNotification(userInfo:)` while this chat was open.
    public let notifications: AsyncStream<PushPayload>

    let client: ParleyClient
    private let continuation: AsyncStream<PushPayload>.Continuation
    private let state: NIOLockedValueBox<State>

    private struct State {
        var prefill: String?
        var isOpen = true
    }

    init(client: ParleyClient, conversationId: String, prefill: String?) {
        self.client = client
        self.conversationId = conversationId
        (notifications, continuation) = AsyncStream.makeStream(of: PushPayload.self)
        state = NIOLockedValueBox(State(prefill: prefill))
    }

    /// Whether the chat is still open.
    public var isOpen: Bool { state.withLockedValue { $0.isOpen } }

    /// The text given to ``ParleyClient/prefill(message:)`` before this chat opened, once: later calls return nil.
    public func takePrefill() -> String? {
        state.withLockedValue { state in
            defer { state.prefill = nil }
            return state.prefill
        }
    }

    /// A page of the conversation's history, ascending; pass `nextCursor` for the older page.
    public func history(limit: Int = 50, cursor: String? = nil) async throws -> MessagePage {
        try requireOpen()
        return try await client.fetchMessages(conversationId: conversationId, limit: limit, cursor: cursor)
    }

    /// This conversation's live events from now on (messages, receipts, typing ...), in order.
    public func events() -> AsyncStream<Event> {
        client.events(conversationId: conversationId)
    }

    /// Sends a text message to the conversation (through the durable outbox, like
    /// ``ParleyClient/sendTextMessage(_:to:metadata:replyTo:mentions:clientMessageId:)``).
    @discardableResult
    public func send(_ text: String, metadata: JSONValue? = nil) async throws -> Message {
        try requireOpen()
        return try await client.sendTextMessage(text, to: .conversation(conversationId), metadata: metadata)
    }

    /// The user is typing (throttled to one frame every 3 s). Returns whether a frame went out.
    @discardableResult
    public func startTyping() async -> Bool {
        guard isOpen else { return false }
        return await client.startTyping(in: conversationId)
    }

    /// The user stopped typing.
    @discardableResult
    public func stopTyping() async -> Bool {
        guard isOpen else { return false }
        return await client.stopTyping(in: conversationId)
    }

    /// Marks the conversation read up to `seq`.
    public func markRead(upTo seq: Int64) async throws {
        try requireOpen()
        try await client.markRead(upTo: seq, in: conversationId)
    }

    /// Closes the chat (the user left the screen). Idempotent.
    public func close() {
        client.chatClosed(self)
        markClosed()
    }

    func markClosed() {
        state.withLockedValue { $0.isOpen = false }
        continuation.finish()
    }

    func deliver(_ payload: PushPayload) {
        continuation.yield(payload)
    }

    private func requireOpen() throws {
        guard isOpen else { throw ParleyError(.chatNotOpened, "This chat is closed; open it again.") }
    }
}
