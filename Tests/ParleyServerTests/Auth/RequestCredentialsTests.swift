import Testing

@testable import ParleyServer

/// The token of an `Authorization: Bearer <token>` header (RFC 6750): the scheme in any case, the token without the
/// blanks around it; anything else is no token.
@Suite struct RequestCredentialsTests {
    @Test(arguments: [
        ("Bearer tok_123", "tok_123"),
        ("bearer tok_123", "tok_123"),
        ("BEARER tok_123", "tok_123"),
        ("Bearer   tok_123 \t", "tok_123"),
        ("Bearer a b", "a b"),
    ])
    func aBearerTokenIsFound(header: String, token: String) {
        #expect(RequestCredentials.bearer(fromAuthorization: header) == token)
    }

    @Test(arguments: [
        "", "Bearer", "Bearer ", "Bearer   \t ", "Basic dXNlcjpwYXNz", "Bearer:tok", "Bearers tok", "Beärer tok",
        "Bearer\ttok", "Token tok",
    ])
    func anythingElseIsNoToken(header: String) {
        #expect(RequestCredentials.bearer(fromAuthorization: header) == nil)
    }

    @Test func noHeaderIsNoToken() {
        #expect(RequestCredentials.bearer(fromAuthorization: nil) == nil)
    }
}
