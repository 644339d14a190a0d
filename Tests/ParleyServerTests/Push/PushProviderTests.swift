import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import ParleyProtocol
import Testing

@testable import ParleyServer

/// The pure parts of the APNs provider: payloads, answers, backoff, the provider token.
@Suite struct PushProviderTests {
    func message(_ parts: [MessagePart], alert: String? = nil) -> Message {
        Message(id: "m_1", conversationId: "c_1", seq: 7, sender: "alice", parts: parts, alert: alert, sentAt: 1)
    }

    func json(_ bytes: [UInt8]) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any] ?? [:]
    }

    @Test func theAlertIsTheExplicitAlertElseTheTextElseAGenericLine() {
        #expect(PushComposer.body(of: message([.text("hi"), .text("there")])) == "hi\nthere")
        #expect(PushComposer.body(of: message([.text("hi")], alert: "Alice sent a photo")) == "Alice sent a photo")
        #expect(PushComposer.body(of: message([.text("hi")], alert: "")) == "hi")
        #expect(
            PushComposer.body(of: message([.data(.object(["lat": .number(1)]), name: "location")])) == "New message")
    }

    @Test func aLongTextIsCutAtACharacterBoundaryAndThePayloadStaysUnderFourKilobytes() {
        let text = String(repeating: "é👍🏽", count: 2_000)
        let payload = PushComposer.payload(
            message: message([.text(text)]), senderName: String(repeating: "N", count: 5_000), groupName: "G", badge: 3
        )
        #expect(payload.count < 4096)
        let aps = json(payload)["aps"] as? [String: Any]
        let alert = aps?["alert"] as? [String: String] ?? [:]
        let body = alert["body"] ?? ""
        #expect(body.utf8.count <= PushComposer.maxBodyBytes && body.hasSuffix("…"))
        #expect(text.hasPrefix(String(body.dropLast())))
        #expect((alert["title"] ?? "").utf8.count <= PushComposer.maxTitleBytes)
        #expect(PushComposer.truncated("short", maxBytes: 10) == "short")
    }

    @Test func thePayloadCarriesBadgeThreadAndParleyIds() {
        let payload = json(
            PushComposer.payload(message: message([.text("hi")]), senderName: "Alice", groupName: nil, badge: 4))
        let aps = payload["aps"] as? [String: Any]
        #expect(
            aps?["badge"] as? Int == 4 && aps?["thread-id"] as? String == "c_1" && aps?["sound"] as? String == "default"
        )
        #expect((aps?["alert"] as? [String: String]) == ["title": "Alice", "body": "hi"])
        let parley = payload["parley"] as? [String: Any]
        #expect(parley?["conversationId"] as? String == "c_1" && parley?["messageId"] as? String == "m_1")
        #expect(parley?["seq"] as? Int == 7 && parley?.count == 3)
    }

    func outcome(_ status: HTTPResponseStatus, _ body: String, headers: HTTPHeaders = [:]) -> (PushSendOutcome, Bool) {
        var expired = false
        let outcome = APNsClient.outcome(status: status, headers: headers, body: ByteBuffer(string: body)) {
            expired = true
        }
        return (outcome, expired)
    }

    @Test func apnsAnswersMapToDeliveredInvalidRetryOrRejected() {
        #expect(outcome(.ok, "").0 == .delivered)
        #expect(
            outcome(.gone, #"{"reason":"Unregistered","timestamp":1700000000000}"#).0
                == .invalidToken(reason: "Unregistered", since: 1_700_000_000_000))
        #expect(
            outcome(.badRequest, #"{"reason":"BadDeviceToken"}"#).0
                == .invalidToken(reason: "BadDeviceToken", since: nil))
        #expect(
            outcome(.badRequest, #"{"reason":"DeviceTokenNotForTopic"}"#).0
                == .invalidToken(reason: "DeviceTokenNotForTopic", since: nil))
        #expect(
            outcome(.tooManyRequests, #"{"reason":"TooManyRequests"}"#).0
                == .retry(reason: "TooManyRequests", after: nil))
        #expect(
            outcome(.serviceUnavailable, "", headers: ["retry-after": "30"]).0
                == .retry(reason: "HTTP 503", after: .seconds(30)))
        #expect(
            outcome(.internalServerError, #"{"reason":"InternalServerError"}"#).0
                == .retry(reason: "InternalServerError", after: nil))
        let expired = outcome(.forbidden, #"{"reason":"ExpiredProviderToken"}"#)
        #expect(expired.0 == .retry(reason: "ExpiredProviderToken", after: .zero) && expired.1)
        #expect(outcome(.payloadTooLarge, #"{"reason":"PayloadTooLarge"}"#).0 == .rejected(reason: "PayloadTooLarge"))
        #expect(outcome(.badRequest, #"{"reason":"BadCollapseId"}"#).0 == .rejected(reason: "BadCollapseId"))
    }

    @Test func retriesWaitOneSecondDoublingUpToTheCap() {
        let policy = PushRetryPolicy()
        #expect(
            (1...12).map { policy.delay(afterAttempts: $0) }
                == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 600, 600].map { .seconds($0) })
    }

    @Test func theProviderTokenIsAnES256JWTReusedFor50Minutes() throws {
        let key = P256.Signing.PrivateKey()
        let token = APNsProviderToken(key: key, keyId: "KEY1234567", teamId: "TEAM123456")
        let first = try token.token(now: 1_000_000)
        #expect(try token.token(now: 1_000_000 + 49 * 60) == first)
        let second = try token.token(now: 1_000_000 + 50 * 60)
        #expect(second != first)
        token.expire(second)
        #expect(try token.token(now: 1_000_000 + 50 * 60 + 1) != second)

        let parts = first.split(separator: ".").map(String.init)
        #expect(parts.count == 3)
        func decode(_ part: String) -> Data {
            var base64 = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            while base64.count % 4 != 0 { base64 += "=" }
            return Data(base64Encoded: base64) ?? Data()
        }
        #expect(String(decoding: decode(parts[0]), as: UTF8.self) == #"{"alg":"ES256","kid":"KEY1234567"}"#)
        #expect(String(decoding: decode(parts[1]), as: UTF8.self) == #"{"iss":"TEAM123456","iat":1000000}"#)
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: decode(parts[2]))
        #expect(key.publicKey.isValidSignature(signature, for: Array((parts[0] + "." + parts[1]).utf8)))
    }
}
