/// The state of the real-time connection, readable at any time and reported to connection listeners.
public enum ConnectionStatus: Sendable, Hashable, CustomStringConvertible {
    /// Not connected and not trying: nobody is logged in, the app is in the background (auto mode), or the app
    /// called `disconnect()`.
    case disconnected
    /// Opening the socket.
    case connecting
    /// Connected: real-time events flow.
    case connected
    /// The connection was lost; the next attempt starts after `delay` (exponential backoff with jitter).
    case reconnecting(attempt: Int, delay: Duration, error: ParleyError)
    /// The device is offline (`ERR_NO_INTERNET`); the SDK reconnects as soon as the network returns.
    case waitingForNetwork
    /// Stopped: the server rejected the auth token and there is no token provider (`ERR_AUTH_TOKEN_INVALID`), the
    /// user was deactivated (`ERR_USER_DEACTIVATED`), or the token provider failed too many times in a row
    /// (`ERR_TOKEN_REFRESH_FAILED`). Log in again, or call `connect()` once the cause is fixed.
    case failed(ParleyError)

    /// The reference SDK's three-valued status: `"connected"`, `"connecting"` or `"disconnected"`.
    public var value: String {
        switch self {
        case .connected: return "connected"
        case .connecting: return "connecting"
        case .disconnected, .reconnecting, .waitingForNetwork, .failed: return "disconnected"
        }
    }

    /// A short description for logs, with the attempt, delay and error code when there are some.
    public var description: String {
        switch self {
        case .disconnected: return "disconnected"
        case .connecting: return "connecting"
        case .connected: return "connected"
        case .reconnecting(let attempt, let delay, let error):
            return "reconnecting (attempt \(attempt) in \(delay), after \(error.code))"
        case .waitingForNetwork: return "waiting for network"
        case .failed(let error): return "failed (\(error.code))"
        }
    }
}
