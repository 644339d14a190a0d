extension ParleyClient {
    /// Adds an event listener (replacing one with the same id). Every listener gets every event once, in order,
    /// on the callback queue.
    public func addEventListener(_ id: String, _ listener: any ParleyEventListener) {
        eventBroadcaster.add(id, listener)
    }

    /// Removes the event listener with this id; it gets no more events.
    public func removeEventListener(_ id: String) {
        eventBroadcaster.remove(id)
    }

    /// Every event from now on, optionally only some kinds or one conversation.
    ///
    /// ```swift
    /// for await event in client.events(names: [.messageSent], conversationId: id) { ... }
    /// ```
    public func events(names: Set<EventName>? = nil, conversationId: String? = nil) -> AsyncStream<Event> {
        let all = eventBroadcaster.stream()
        guard names != nil || conversationId != nil else { return all }
        return AsyncStream { continuation in
            let task = Task {
                for await event in all {
                    if let names, !names.contains(event.name) { continue }
                    if let conversationId, event.conversationId != conversationId { continue }
                    continuation.yield(event)
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}
