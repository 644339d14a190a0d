import NIOConcurrencyHelpers

/// Requests sent over the WebSocket that wait for the server's answer (an ack or an error with their `ref`).
///
/// A slot is opened before the frame is sent, so an answer that arrives before the caller starts waiting is kept.
final class PendingRequests: Sendable {
    private enum Slot {
        case open
        case waiting(CheckedContinuation<AckFrame, any Error>)
        case done(Result<AckFrame, ParleyError>)
    }

    private let slots = NIOLockedValueBox([String: Slot]())

    /// Opens a slot for `ref`.
    func open(_ ref: String) {
        slots.withLockedValue { $0[ref] = .open }
    }

    /// Waits for the answer to `ref` (the slot must be open). Cancelling the waiting task answers it with
    /// `ERR_NOT_CONNECTED`.
    func wait(_ ref: String) async throws -> AckFrame {
        try await withTaskCancellationHandler {
            try await waitUncancellable(ref)
        } onCancel: {
            complete(ref, with: .failure(ParleyError(.notConnected, "The request was cancelled.")))
        }
    }

    private func waitUncancellable(_ ref: String) async throws -> AckFrame {
        try await withCheckedThrowingContinuation { continuation in
            let ready = slots.withLockedValue { slots -> Result<AckFrame, ParleyError>? in
                switch slots[ref] {
                case .done(let result):
                    slots[ref] = nil
                    return result
                case .open:
                    slots[ref] = .waiting(continuation)
                    return nil
                case .waiting, .none:
                    return .failure(ParleyError(.internalError, "No open request \(ref)."))
                }
            }
            if let ready { continuation.resume(with: ready) }
        }
    }

    /// Answers `ref`; does nothing when it was already answered.
    func complete(_ ref: String, with result: Result<AckFrame, ParleyError>) {
        let waiter = slots.withLockedValue { slots -> CheckedContinuation<AckFrame, any Error>? in
            switch slots[ref] {
            case .open:
                slots[ref] = .done(result)
                return nil
            case .waiting(let continuation):
                slots[ref] = nil
                return continuation
            case .done, .none:
                return nil
            }
        }
        waiter?.resume(with: result.mapError { $0 })
    }

    /// Fails every request still waiting (the socket went away).
    func failAll(with error: ParleyError) {
        let refs = slots.withLockedValue { Array($0.keys) }
        for ref in refs { complete(ref, with: .failure(error)) }
    }
}
