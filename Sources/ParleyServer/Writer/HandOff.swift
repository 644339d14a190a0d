import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import ParleyProtocol
import ParleyStore
import ServiceLifecycle

/// A rendezvous between one producer and one consumer: ``put(_:)`` returns once ``take()`` has taken the element, so
/// the producer is never more than one element ahead of the consumer.
final class HandOff<Element: Sendable>: Sendable {
    private struct State {
        var element: Element?
        /// The producer, waiting for its element to be taken.
        var putter: CheckedContinuation<Void, Never>?
        /// The consumer, waiting for an element (nil: the end).
        var taker: CheckedContinuation<Element?, Never>?
        var finished = false
    }

    private let state = NIOLockedValueBox(State())

    /// Hands `element` over; returns when the consumer has it. One producer: never called while a put is pending.
    func put(_ element: Element) async {
        await withCheckedContinuation { (putter: CheckedContinuation<Void, Never>) in
            let taker = state.withLockedValue { state -> CheckedContinuation<Element?, Never>? in
                precondition(
                    state.element == nil && state.putter == nil && !state.finished, "HandOff: one put at a time")
                if let taker = state.taker {
                    state.taker = nil
                    return taker
                }
                state.element = element
                state.putter = putter
                return nil
            }
            if let taker {
                taker.resume(returning: element)
                putter.resume()
            }
        }
    }

    /// The next element, or nil once ``finish()`` was called and everything put was taken. One consumer.
    func take() async -> Element? {
        await withCheckedContinuation { (taker: CheckedContinuation<Element?, Never>) in
            let (element, putter, end) = state.withLockedValue {
                state -> (Element?, CheckedContinuation<Void, Never>?, Bool) in
                precondition(state.taker == nil, "HandOff: one take at a time")
                if let element = state.element {
                    defer { (state.element, state.putter) = (nil, nil) }
                    return (element, state.putter, false)
                }
                if state.finished { return (nil, nil, true) }
                state.taker = taker
                return (nil, nil, false)
            }
            if let element {
                putter?.resume()
                taker.resume(returning: element)
            } else if end {
                taker.resume(returning: nil)
            }
        }
    }

    /// No more elements: the consumer's next ``take()`` after the last one returns nil.
    func finish() {
        let taker = state.withLockedValue { state -> CheckedContinuation<Element?, Never>? in
            state.finished = true
            defer { state.taker = nil }
            return state.element == nil ? state.taker : nil
        }
        taker?.resume(returning: nil)
    }
}
