/// The server sent something that is not valid NATS protocol; the connection must be closed.
struct NATSProtocolError: Error, Equatable, CustomStringConvertible {
    var description: String

    init(_ description: String) {
        self.description = description
    }
}
