/// The server sent something that is not valid NATS protocol; the connection must be closed.
package struct NATSProtocolError: Error, Equatable, CustomStringConvertible {
    package var description: String

    init(_ description: String) {
        self.description = description
    }
}
