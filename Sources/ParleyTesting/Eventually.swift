/// Polls `condition` every 10 ms, on the caller's actor (a `@MainActor` test reads its models there), until it holds
/// or `timeout` passes; whether it held. For state that follows a server's events, which arrive when they arrive.
public func eventually(
    timeout: Duration = .seconds(10), isolation: isolated (any Actor)? = #isolation, _ condition: () -> Bool
) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        guard ContinuousClock.now < deadline else { return false }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return true
}
