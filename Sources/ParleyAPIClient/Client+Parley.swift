package import Foundation
package import OpenAPIRuntime
internal import ParleyAPI

extension Client {
    /// The generated client of the REST API with Parley's coding (``parleyOpenAPIConfiguration``, the server's too).
    package init(parley serverURL: URL, transport: any ClientTransport, middlewares: [any ClientMiddleware]) {
        self.init(
            serverURL: serverURL, configuration: parleyOpenAPIConfiguration, transport: transport,
            middlewares: middlewares
        )
    }
}
