import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyStore

/// The app a request turned out to be for, recorded by authentication (a token's or an API key's app, or the app a
/// login names) so that the CORS answer can follow that app's allowed origins. Exists only for requests with an
/// `Origin` header.
final class RequestApp: Sendable {
    @TaskLocal static var current: RequestApp?

    private let box = NIOLockedValueBox<String?>(nil)

    var appId: String? { box.withLockedValue { $0 } }

    /// Records the request's app on the current request, if it has an `Origin`.
    static func record(_ appId: String) {
        current?.box.withLockedValue { $0 = appId }
    }
}
