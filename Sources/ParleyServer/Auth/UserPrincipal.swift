import Foundation
import ParleyProtocol
import ParleyStore

/// An authenticated user connection or request.
struct UserPrincipal: Sendable, Hashable {
    var appId: String
    var uid: String
    var tokenId: String
    var expiresAt: Int64?
}
