import Foundation
import NIOCore
import ParleyTesting
import Testing

@testable import NATSNIO

@Suite("Encoding, addresses, headers and subjects")
struct NATSEncodingTests {
    // MARK: Addresses

    @Test func parseServersReadsAListWithCredentialsAndDefaultPorts() throws {
        let servers = try NATSConfiguration.parseServers("nats://h1:4222,nats://user:pass@h2:4223, nats://tok@h3")
        #expect(
            servers == [
                NATSServerAddress(host: "h1", port: 4222),
                NATSServerAddress(host: "h2", port: 4223, user: "user", password: "pass"),
                NATSServerAddress(host: "h3", port: 4222, token: "tok"),
            ])
    }

    @Test func parseServersAcceptsIPv6SchemelessAndPercentEncoding() throws {
        #expect(try NATSServerAddress(url: "nats://[::1]:4300") == NATSServerAddress(host: "::1", port: 4300))
        #expect(try NATSServerAddress(url: "10.0.0.1:5000") == NATSServerAddress(host: "10.0.0.1", port: 5000))
        #expect(
            try NATSServerAddress(url: "nats://u%40x:p%3Aw@h")
                == NATSServerAddress(host: "h", user: "u@x", password: "p:w"))
        #expect(try NATSServerAddress(url: "NATS://h/") == NATSServerAddress(host: "h"))
    }

    @Test func tlsIsRefusedWithAClearError() {
        #expect {
            try NATSConfiguration.parseServers("nats://a,tls://b:4443")
        } throws: { error in
            (error as? NATSError)?.code == .tlsNotSupported && "\(error)".contains("TLS not supported yet")
        }
    }

    @Test(arguments: [
        ("", "empty server list"), ("nats://a,,nats://b", "position 2"), ("nats://a:99999", "invalid port '99999'"),
        ("nats://a:x", "invalid port 'x'"), ("http://a", "unsupported scheme 'http'"), ("nats://:4222", "missing host"),
        ("nats://a/path", "unexpected path"), ("nats://a b:4222", "invalid host 'a b'"),
    ])
    func malformedURLsNameTheBadPart(_ input: String, _ expected: String) {
        #expect {
            try NATSConfiguration.parseServers(input)
        } throws: { error in
            (error as? NATSError)?.code == .invalidURL && "\(error)".contains(expected)
        }
    }

    @Test func descriptionsHideSecrets() throws {
        let address = try NATSServerAddress(url: "nats://user:secret@h:1")
        #expect(address.description == "nats://user:***@h:1")
        #expect(try NATSServerAddress(url: "nats://tok@h").description == "nats://***@h:4222")
        do {
            _ = try NATSServerAddress(url: "nats://user:secret@h:bad")
            Issue.record("expected an error")
        } catch {
            #expect(!error.description.contains("secret"))
        }
    }

    // MARK: Client operations

    @Test func publishOperationsAreEncodedExactly() {
        var buffer = ByteBuffer()
        NATSProtocolEncoder.writePublish(
            subject: "a.b", replyTo: nil, headers: nil, headerLength: 0, payload: ByteBuffer(string: "hi"),
            into: &buffer)
        NATSProtocolEncoder.writePublish(
            subject: "a", replyTo: "r.1", headers: nil, headerLength: 0, payload: ByteBuffer(), into: &buffer)
        let headers: NATSHeaders = ["K": "v1", "K": "v2"]
        NATSProtocolEncoder.writePublish(
            subject: "h", replyTo: "r", headers: headers, headerLength: headers.encodedLength,
            payload: ByteBuffer(string: "xyz"), into: &buffer)
        #expect(
            String(buffer: buffer)
                == "PUB a.b 2\r\nhi\r\nPUB a r.1 0\r\n\r\nHPUB h r 26 29\r\nNATS/1.0\r\nK: v1\r\nK: v2\r\n\r\nxyz\r\n")
    }

    @Test func subscriptionOperationsAreEncodedExactly() {
        var buffer = ByteBuffer()
        NATSProtocolEncoder.writeSubscribe(NATSSubscription(sid: 7, subject: "a.*", queueGroup: nil), into: &buffer)
        NATSProtocolEncoder.writeSubscribe(NATSSubscription(sid: 12, subject: "b.>", queueGroup: "q"), into: &buffer)
        NATSProtocolEncoder.writeUnsubscribe(sid: 7, into: &buffer)
        NATSProtocolEncoder.writePing(into: &buffer)
        NATSProtocolEncoder.writePong(into: &buffer)
        #expect(String(buffer: buffer) == "SUB a.* 7\r\nSUB b.> q 12\r\nUNSUB 7\r\nPING\r\nPONG\r\n")
    }

    @Test func connectCarriesTheDocumentedFields() throws {
        var configuration = NATSConfiguration(servers: [])
        configuration.name = "node \"1\""
        configuration.echo = false
        var buffer = ByteBuffer()
        let server = NATSServerAddress(host: "h", user: "u", password: "p")
        NATSProtocolEncoder.writeConnect(.init(configuration: configuration, server: server), into: &buffer)
        let line = String(buffer: buffer)
        #expect(line.hasPrefix("CONNECT {") && line.hasSuffix("}\r\n"))
        let json = try JSONSerialization.jsonObject(with: Data(line.dropFirst(8).dropLast(1).utf8)) as! [String: Any]
        #expect(json["verbose"] as? Bool == false)
        #expect(json["pedantic"] as? Bool == false)
        #expect(json["headers"] as? Bool == true)
        #expect(json["no_responders"] as? Bool == true)
        #expect(json["echo"] as? Bool == false)
        #expect(json["protocol"] as? Int == 1)
        #expect(json["lang"] as? String == "swift")
        #expect(json["name"] as? String == "node \"1\"")
        #expect(json["user"] as? String == "u")
        #expect(json["pass"] as? String == "p")
        #expect(json["auth_token"] == nil)
    }

    @Test func decimalsAreWrittenWithoutAllocating() {
        for value: UInt64 in [0, 9, 10, 99, 100, 4096, 1 << 20, .max] {
            var buffer = ByteBuffer()
            buffer.writeDecimal(value)
            #expect(String(buffer: buffer) == String(value))
            #expect(value.decimalDigitCount == String(value).count)
        }
    }

    @Test func onlyPublishesSurviveALostConnection() {
        var buffer = ByteBuffer()
        NATSProtocolEncoder.writeSubscribe(NATSSubscription(sid: 1, subject: "a", queueGroup: nil), into: &buffer)
        NATSProtocolEncoder.writePublish(
            subject: "a", replyTo: nil, headers: nil, headerLength: 0, payload: ByteBuffer(string: "PING\r\nSUB x 1"),
            into: &buffer)
        NATSProtocolEncoder.writePing(into: &buffer)
        NATSProtocolEncoder.writeUnsubscribe(sid: 1, into: &buffer)
        let headers: NATSHeaders = ["A": "1"]
        NATSProtocolEncoder.writePublish(
            subject: "b", replyTo: "r", headers: headers, headerLength: headers.encodedLength,
            payload: ByteBuffer(string: "\r\n"), into: &buffer)
        #expect(
            String(buffer: NATSProtocolEncoder.publishesOnly(buffer))
                == "PUB a 13\r\nPING\r\nSUB x 1\r\nHPUB b r 18 20\r\nNATS/1.0\r\nA: 1\r\n\r\n\r\n\r\n")
    }

    // MARK: Headers

    @Test func headersRoundTripInOrderWithDuplicates() throws {
        var headers: NATSHeaders = ["Content-Type": "text/plain", "X-Multi": "1"]
        headers.append("2", for: "X-Multi")
        headers.append("with: colon", for: "Y")
        var buffer = ByteBuffer()
        headers.write(into: &buffer)
        #expect(buffer.readableBytes == headers.encodedLength)
        let parsed = try NATSHeaders.parse(buffer)
        #expect(parsed == headers)
        #expect(parsed.values(for: "x-multi") == ["1", "2"])
        #expect(parsed["content-type"] == "text/plain")
        #expect(parsed["Y"] == "with: colon")
    }

    @Test func statusLinesAreParsed() throws {
        let noResponders = try NATSHeaders.parse(ByteBuffer(string: "NATS/1.0 503 No Responders\r\n\r\n"))
        #expect(noResponders.status == 503 && noResponders.statusDescription == "No Responders")
        #expect(noResponders.fields.isEmpty)
        let bare = try NATSHeaders.parse(ByteBuffer(string: "NATS/1.0 503\r\n\r\n"))
        #expect(bare.status == 503 && bare.statusDescription == nil)
        let withFields = try NATSHeaders.parse(ByteBuffer(string: "NATS/1.0 408 Request Timeout\r\nA: b\r\n\r\n"))
        #expect(withFields.status == 408 && withFields["a"] == "b")
        var encoded = ByteBuffer()
        noResponders.write(into: &encoded)
        #expect(String(buffer: encoded) == "NATS/1.0 503 No Responders\r\n\r\n")
    }

    @Test func headersThatCannotBeEncodedAreRefused() {
        for headers: NATSHeaders in [["": "v"], ["a b": "v"], ["a:b": "v"], ["a": "v\r\nX: y"]] {
            #expect(throws: NATSError.self) { try headers.validate() }
        }
        #expect(throws: Never.self) { try (["a": "v: w"] as NATSHeaders).validate() }
    }

    @Test func headersCanBeSetAndRemoved() {
        var headers: NATSHeaders = ["A": "1", "a": "2", "B": "3"]
        headers.set("9", for: "a")
        #expect(headers.fields == [.init(name: "B", value: "3"), .init(name: "a", value: "9")])
        headers.remove("B")
        #expect(headers.fields == [.init(name: "a", value: "9")])
    }

    // MARK: Subjects

    @Test(arguments: ["a", "a.b", "a.b.c", "_INBOX.x.1", "a*b", "a>.b", "ünï.cødé", "$JS.API"])
    func validPublishSubjects(_ subject: String) {
        #expect(throws: Never.self) { try NATSSubject.validatePublish(subject) }
        #expect(throws: Never.self) { try NATSSubject.validateSubscribe(subject) }
    }

    @Test(arguments: ["", ".", "a.", ".a", "a..b", "a b", "a\tb", "a\r\nb", "*", ">", "a.*", "a.>", "*.a"])
    func invalidPublishSubjects(_ subject: String) {
        #expect(throws: NATSError.self) { try NATSSubject.validatePublish(subject) }
    }

    @Test(arguments: ["*", ">", "a.*", "a.>", "*.a", "a.*.b.>", "*.*"])
    func wildcardSubscriptions(_ subject: String) {
        #expect(throws: Never.self) { try NATSSubject.validateSubscribe(subject) }
    }

    @Test(arguments: ["", "a.>.b", ">.a", "a..b", "a b", "a.", "a.>."])
    func invalidSubscriptions(_ subject: String) {
        #expect(throws: NATSError.self) { try NATSSubject.validateSubscribe(subject) }
    }
}
