import HTTPTypes
import NIOHTTP1

/// RFC 6455 section 4.2.1 for an upgrade request that reaches NIO's HTTP pipeline (``WebSocketUpgradeSniffer`` answers
/// the plain ones itself): a request that asks for `Upgrade: websocket` must be a `GET` of ``WebSocketGateway/path``
/// over HTTP/1.1, without a body, with `Connection: Upgrade`, `Sec-WebSocket-Version: 13` and one `Sec-WebSocket-Key`
/// that is the base64 of 16 bytes. Anything else is refused before NIO's upgrader sees it: 400, or 426 with
/// `Sec-WebSocket-Version: 13` for another version (section 4.4).
enum WebSocketUpgradeValidation {
    struct Refusal {
        var status: HTTPResponse.Status
        var message: String
        var headers: [(String, String)] = []
    }

    /// Why an upgrade request is refused; nil when it is valid, or not a WebSocket upgrade at all.
    static func refusal(of head: HTTPRequestHead) -> Refusal? {
        let upgrade = head.headers["upgrade"].flatMap { $0.split(separator: ",") }.map {
            $0.trimmingCharacters(in: .whitespaces).lowercased()
        }
        guard upgrade.contains("websocket") else { return nil }
        func refused(_ why: String) -> Refusal {
            Refusal(status: .badRequest, message: "Not a valid WebSocket upgrade: \(why).")
        }
        guard WebSocketGateway.accepts(uri: head.uri) else {
            return refused("the WebSocket is at \(WebSocketGateway.path)")
        }
        guard head.method == .GET else { return refused("the method must be GET") }
        guard head.version == .http1_1 else { return refused("it must be HTTP/1.1") }
        guard upgrade == ["websocket"] else { return refused("Upgrade must be websocket, once") }
        let connection = head.headers["connection"].flatMap { $0.split(separator: ",") }.map {
            $0.trimmingCharacters(in: .whitespaces).lowercased()
        }
        guard connection.contains("upgrade") else { return refused("Connection must name upgrade") }
        let versions = head.headers["sec-websocket-version"]
        guard !versions.isEmpty else { return refused("Sec-WebSocket-Version is missing") }
        guard versions == ["13"] else {
            return Refusal(
                status: .upgradeRequired, message: "This server speaks WebSocket version 13 (RFC 6455).",
                headers: [("Sec-WebSocket-Version", "13")]
            )
        }
        let keys = head.headers["sec-websocket-key"]
        guard keys.count == 1, WebSocketUpgradeRequest.isValidKey(keys[0].utf8) else {
            return refused("Sec-WebSocket-Key must be the base64 of 16 bytes, once")
        }
        guard head.headers["authorization"].count <= 1 else { return refused("at most one Authorization") }
        guard !head.headers.contains(name: "transfer-encoding"),
            head.headers["content-length"].allSatisfy({ $0 == "0" })
        else { return refused("an upgrade request has no body") }
        return nil
    }
}
