import Foundation
import NIOConcurrencyHelpers

/// The durable outbox: messages the app sent, and the edits, deletions and reactions it made, that the server has not
/// confirmed yet, kept in a JSON file next to the saved session, sent one at a time in the order they were written
/// (so one sender's actions keep their order).
///
/// The sender loop (``ParleyClient`` runs it) takes the oldest pending entry with ``takeNext()``, tries it, and
/// reports with ``finish(_:with:)`` or ``release(_:)``. An entry being tried cannot be cancelled: the server may
/// already have it.
///
/// The outbox also remembers the server ids of the messages it sent last (``sentLimit``), so that an edit, a
/// deletion or a reaction queued for a message still in the outbox (``MessageRef/queued(clientMessageId:)``) reaches
/// that message once it is sent, also after a restart.
///
/// A send with a file (``OutgoingMessage/file``) keeps a copy of the file in ``filesDirectory`` from the moment it is
/// queued until the message is sent, or the entry is cancelled or dropped.
final class Outbox: Sendable {
    private struct Saved: Codable {
        var uid: String
        var messages: [OutgoingMessage]
        /// Client message id and server id of the messages sent last, oldest first.
        var sent: [SentMessage]?
    }

    struct SentMessage: Codable, Sendable, Hashable {
        var clientMessageId: String
        var messageId: String
    }

    /// Sent messages whose ids are remembered.
    static let sentLimit = 1000

    private struct State {
        var uid: String?
        /// Pending and failed messages, oldest first.
        var messages: [OutgoingMessage] = []
        var inFlight: String?
        /// Stops the upload of the in-flight entry's file, while it runs.
        var stopUpload: (@Sendable () -> Void)?
        var sent: [SentMessage] = []
        /// Callers waiting for their entry's outcome.
        var waiters: [String: [UUID: CheckedContinuation<OutboxOutcome, any Error>]] = [:]
        /// Messages whose failure is reported to a waiting caller: dropped from the outbox once it knows.
        var dropOnFailure: Set<String> = []
        var wake: CheckedContinuation<Void, Never>?
        var woken = false

        func saved(_ uid: String) -> Saved { Saved(uid: uid, messages: messages, sent: sent) }
    }

    private let fileURL: URL
    /// The copies of the files queued to be sent.
    let filesDirectory: URL
    private let state = NIOLockedValueBox(State())
    private let notify: @Sendable (OutgoingMessage) -> Void

    init(directory: URL, appId: String, notify: @escaping @Sendable (OutgoingMessage) -> Void) {
        self.fileURL = directory.appendingPathComponent("outbox-\(SessionStore.safeName(appId)).json")
        self.filesDirectory = directory.appendingPathComponent("outbox-files-\(SessionStore.safeName(appId))")
        self.notify = notify
    }

    /// Where the copy of an entry's file is.
    func storedFile(_ file: OutgoingFile) -> URL {
        filesDirectory.appendingPathComponent(file.storedFileName)
    }

    /// Removes the copy of `message`'s file, if it has one.
    private func removeStoredFile(of message: OutgoingMessage?) {
        guard let file = message?.file else { return }
        try? FileManager.default.removeItem(at: storedFile(file))
    }

    // MARK: The user

    /// Loads `uid`'s saved outbox (a message that was being sent when the app stopped is pending again).
    func begin(uid: String) {
        var messages: [OutgoingMessage] = []
        var sent: [SentMessage] = []
        if let data = try? Data(contentsOf: fileURL), let saved = try? JSONDecoder().decode(Saved.self, from: data),
            saved.uid == uid
        {
            messages = saved.messages
            sent = saved.sent ?? []
        }
        state.withLockedValue { state in
            state.uid = uid
            state.messages = messages
            state.sent = sent
            state.inFlight = nil
        }
        removeUnusedFiles(keeping: Set(messages.compactMap { $0.file?.storedFileName }))
        signal()
    }

    /// Removes copies no entry names: the app stopped between copying a file and saving its entry, or another
    /// user's outbox was replaced.
    private func removeUnusedFiles(keeping used: Set<String>) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: filesDirectory.path)) ?? []
        for name in names where !used.contains(name) {
            try? FileManager.default.removeItem(at: filesDirectory.appendingPathComponent(name))
        }
    }

    /// Forgets the user's outbox (logout): waiting callers fail with `ERR_NOT_LOGGED_IN`.
    func end() {
        let waiters = state.withLockedValue { state -> [CheckedContinuation<OutboxOutcome, any Error>] in
            defer {
                state = State(wake: state.wake, woken: state.woken)
            }
            return state.waiters.values.flatMap(\.values)
        }
        try? FileManager.default.removeItem(at: fileURL)
        try? FileManager.default.removeItem(at: filesDirectory)
        for waiter in waiters {
            waiter.resume(throwing: ParleyError(.notLoggedIn, "Logged out before the message was sent."))
        }
    }

    // MARK: The app

    /// Queues a message (saved before this returns).
    func add(_ message: OutgoingMessage) throws {
        let saved = try state.withLockedValue { state -> Saved in
            guard let uid = state.uid else { throw ParleyError(.notLoggedIn, "Log in first.") }
            state.messages.append(message)
            return state.saved(uid)
        }
        try save(saved)
        notify(message)
        signal()
    }

    /// Queues an entry and waits for its outcome: the stored message (or reactions), or the server's refusal (the
    /// entry then leaves the outbox: the caller knows). Cancelling the waiting task stops the wait, not the entry.
    func perform(_ message: OutgoingMessage) async throws -> OutboxOutcome {
        let id = message.clientMessageId
        let key = UUID()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                // Queued and awaited under one lock: the sender cannot finish it before the waiter is in place.
                let saved = state.withLockedValue { state -> Saved? in
                    guard let uid = state.uid else { return nil }
                    state.messages.append(message)
                    state.dropOnFailure.insert(id)
                    state.waiters[id, default: [:]][key] = continuation
                    return state.saved(uid)
                }
                guard let saved else {
                    continuation.resume(throwing: ParleyError(.notLoggedIn, "Log in first."))
                    return
                }
                do {
                    try save(saved)
                } catch {
                    let waiter = state.withLockedValue { state in
                        state.messages.removeAll { $0.clientMessageId == id }
                        return state.waiters.removeValue(forKey: id)?[key]
                    }
                    waiter?.resume(throwing: error)
                    return
                }
                notify(message)
                signal()
            }
        } onCancel: {
            let waiter = state.withLockedValue { $0.waiters[id]?.removeValue(forKey: key) }
            waiter?.resume(throwing: CancellationError())
        }
    }

    /// The messages not yet sent: pending and failed, oldest first.
    var messages: [OutgoingMessage] { state.withLockedValue { $0.messages } }

    /// Removes a pending or failed message that is not being sent; or one whose file is being uploaded (the upload
    /// stops: the message is not sent while its upload has no id).
    func cancel(_ clientMessageId: String) throws {
        let (saved, cancelled, waiters, stopUpload) = try state.withLockedValue { state in
            guard let index = state.messages.firstIndex(where: { $0.clientMessageId == clientMessageId }) else {
                throw ParleyError(.outboxMessageNotFound, "No queued message \(clientMessageId).")
            }
            var stopUpload: (@Sendable () -> Void)?
            if state.inFlight == clientMessageId {
                guard let stop = state.stopUpload, state.messages[index].file?.attachmentId == nil else {
                    throw ParleyError(.outboxMessageSending, "Message \(clientMessageId) is being sent.")
                }
                stopUpload = stop
                state.stopUpload = nil
            }
            var cancelled = state.messages.remove(at: index)
            cancelled.state = .cancelled
            cancelled.file?.progress = nil
            let waiters = state.waiters.removeValue(forKey: clientMessageId).map { Array($0.values) } ?? []
            return (state.saved(state.uid ?? ""), cancelled, waiters, stopUpload)
        }
        stopUpload?()
        try save(saved)
        removeStoredFile(of: cancelled)
        notify(cancelled)
        for waiter in waiters { waiter.resume(throwing: ParleyError(.messageCancelled, "The message was cancelled.")) }
    }

    /// Sends a failed message again, after the messages queued so far.
    func retry(_ clientMessageId: String) throws {
        let (saved, message) = try state.withLockedValue { state in
            guard let index = state.messages.firstIndex(where: { $0.clientMessageId == clientMessageId }) else {
                throw ParleyError(.outboxMessageNotFound, "No queued message \(clientMessageId).")
            }
            guard case .failed = state.messages[index].state else {
                throw ParleyError(.outboxMessageNotFailed, "Message \(clientMessageId) has not failed.")
            }
            var message = state.messages.remove(at: index)
            message.state = .pending
            state.messages.append(message)
            return (state.saved(state.uid ?? ""), message)
        }
        try save(saved)
        notify(message)
        signal()
    }

    // MARK: The sender loop

    /// The oldest pending message, now in flight; nil when there is none (or one is already in flight).
    func takeNext() -> OutgoingMessage? {
        state.withLockedValue { state in
            guard state.inFlight == nil, let index = state.messages.firstIndex(where: { $0.state == .pending })
            else { return nil }
            state.messages[index].attempts += 1
            state.inFlight = state.messages[index].clientMessageId
            return state.messages[index]
        }
    }

    /// The in-flight message stays pending (a transient failure): it is taken again next time.
    func release(_ clientMessageId: String) {
        state.withLockedValue { state in
            if state.inFlight == clientMessageId {
                state.inFlight = nil
                state.stopUpload = nil
            }
        }
    }

    /// The in-flight entry's file is being uploaded: `stop` ends the upload if the app cancels the entry meanwhile.
    /// Returns false when the entry is no longer in flight (it was cancelled): nothing should be uploaded.
    func uploadStarted(_ clientMessageId: String, stop: @escaping @Sendable () -> Void) -> Bool {
        state.withLockedValue { state in
            guard state.inFlight == clientMessageId else { return false }
            state.stopUpload = stop
            return true
        }
    }

    /// Whether the entry is still in the outbox (not cancelled).
    func contains(_ clientMessageId: String) -> Bool {
        state.withLockedValue { state in state.messages.contains { $0.clientMessageId == clientMessageId } }
    }

    /// The server did what the entry asked, or refused it for good.
    func finish(_ clientMessageId: String, with result: Result<OutboxOutcome, ParleyError>) {
        let (saved, changed, waiters, removed) = state.withLockedValue { state in
            if state.inFlight == clientMessageId {
                state.inFlight = nil
                state.stopUpload = nil
            }
            guard let index = state.messages.firstIndex(where: { $0.clientMessageId == clientMessageId }) else {
                return (Saved?.none, OutgoingMessage?.none, [CheckedContinuation<OutboxOutcome, any Error>](), false)
            }
            var changed = state.messages[index]
            changed.file?.progress = nil
            let waiters = state.waiters.removeValue(forKey: clientMessageId).map { Array($0.values) } ?? []
            switch result {
            case .success(.message(let message)):
                changed.state = .sent(message)
                state.messages.remove(at: index)
                if case .send = changed.action {
                    state.sent.append(SentMessage(clientMessageId: clientMessageId, messageId: message.id))
                    if state.sent.count > Self.sentLimit { state.sent.removeFirst(state.sent.count - Self.sentLimit) }
                }
            case .success(.reactions(let reactions)):
                changed.state = .reacted(reactions)
                state.messages.remove(at: index)
            case .failure(let error):
                changed.state = .failed(code: error.code, message: error.message)
                if state.dropOnFailure.contains(clientMessageId) && !waiters.isEmpty {
                    state.messages.remove(at: index)
                } else {
                    state.messages[index] = changed
                }
            }
            state.dropOnFailure.remove(clientMessageId)
            let removed = !state.messages.contains { $0.clientMessageId == clientMessageId }
            return (state.saved(state.uid ?? ""), changed, waiters, removed)
        }
        if let saved { try? save(saved) }
        // Sent, or refused and reported to the caller: the copy of its file is no longer needed.
        if removed { removeStoredFile(of: changed) }
        if let changed { notify(changed) }
        for waiter in waiters { waiter.resume(with: result.mapError { $0 }) }
    }

    /// The in-flight entry's file was uploaded (`attachmentId`), or its upload is gone and must be made again (nil).
    /// Saved before this returns, so that an app restart does not upload the file again.
    ///
    /// - Throws: `ERR_MESSAGE_CANCELLED` when the app cancelled the entry meanwhile: it must not be sent.
    func recordUpload(_ clientMessageId: String, attachmentId: String?) throws {
        let (saved, changed) = try state.withLockedValue { state -> (Saved?, OutgoingMessage?) in
            guard let uid = state.uid,
                let index = state.messages.firstIndex(where: { $0.clientMessageId == clientMessageId }),
                state.messages[index].file != nil
            else { throw ParleyError(.messageCancelled, "The message was cancelled.") }
            // From here on the message may be sent: it can no longer be cancelled.
            state.stopUpload = nil
            state.messages[index].file?.attachmentId = attachmentId
            if attachmentId != nil { state.messages[index].file?.progress = nil }
            return (state.saved(uid), state.messages[index])
        }
        if let saved { try save(saved) }
        if let changed { notify(changed) }
    }

    /// How far the in-flight entry's upload has come (not saved: it starts again after a restart).
    func reportProgress(_ clientMessageId: String, _ progress: FileTransferProgress) {
        let changed = state.withLockedValue { state -> OutgoingMessage? in
            guard let index = state.messages.firstIndex(where: { $0.clientMessageId == clientMessageId }),
                state.messages[index].file != nil
            else { return nil }
            state.messages[index].file?.progress = progress
            return state.messages[index]
        }
        if let changed { notify(changed) }
    }

    /// The server id of the message `ref` names; nil for a queued message that was not sent (yet, or ever).
    func messageId(for ref: MessageRef) -> String? {
        switch ref {
        case .id(let id): return id
        case .queued(let clientMessageId):
            return state.withLockedValue { state in
                state.sent.last(where: { $0.clientMessageId == clientMessageId })?.messageId
            }
        }
    }

    /// Wakes the sender loop (a new message, a retry, the socket connected).
    func signal() {
        let waiter = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.wake else {
                state.woken = true
                return nil
            }
            state.wake = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Waits for ``signal()`` (at once if one came since the last wait), or until the task is cancelled.
    func waitForSignal() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = state.withLockedValue { state -> Bool in
                    if state.woken || Task.isCancelled {
                        state.woken = false
                        return true
                    }
                    state.wake = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            signal()
        }
    }

    private func save(_ saved: Saved) throws {
        do {
            try FileManager.default.createDirectory(
                at: fileURL.deletingLastPathComponent(), withIntermediateDirectories: true
            )
            try JSONEncoder().encode(saved).write(to: fileURL, options: .atomic)
        } catch {
            throw ParleyError(.storageError, "The outbox could not be saved.", underlying: "\(error)")
        }
    }
}
