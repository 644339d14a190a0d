package import OpenAPIRuntime
internal import ParleyAPI

extension APIProtocol {
    /// Registers the generated routes of the REST API with Parley's coding (``parleyOpenAPIConfiguration``, the
    /// client's too).
    package func registerParleyHandlers(on transport: any ServerTransport, middlewares: [any ServerMiddleware]) throws {
        try registerHandlers(on: transport, configuration: parleyOpenAPIConfiguration, middlewares: middlewares)
    }
}
