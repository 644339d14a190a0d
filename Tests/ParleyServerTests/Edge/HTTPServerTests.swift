import Foundation
import ParleyTesting
import Testing

@testable import ParleyServer

/// `ParleyHTTPServer` answers as Hummingbird's `Application` did: every response carries `Date` (RFC 9110) and
/// `Server: Parley`, on keep-alive connections served one request after another.
@Suite(.timeLimit(.minutes(1))) struct HTTPServerTests {
    @Test func theDateHeaderIsFormattedAsRFC9110Says() {
        #expect(HTTPDates.format(784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDates.format(1_835_481_599) == "Tue, 29 Feb 2028 23:59:59 GMT")
        #expect(HTTPDates.format(0) == "Thu, 01 Jan 1970 00:00:00 GMT")
    }

    @Test func responsesCarryTheDateAndServerHeadersOnEveryRequestOfAConnection() async throws {
        let server = try await TestServer.start { TestServer.patientDeadlines(&$0) }
        let socket = try await RawSocket.connected(port: server.port)
        for path in ["/health", "/v1/no-such-route", "/health"] {
            try await socket.send("GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n")
            let response = try await socket.readResponse()
            #expect(response.status == (path == "/health" ? 200 : 404))
            #expect(response.header("server") == "Parley")
            let date = try #require(response.header("date"))
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
            let sent = try #require(formatter.date(from: date), "\(date)")
            #expect(abs(sent.timeIntervalSinceNow) < 300, "\(date)")
        }
        socket.close()
        try await server.stop()
    }
}
