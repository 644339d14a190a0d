import Foundation
import Logging
import NATSNIO
import NIOConcurrencyHelpers
import NIOCore
import ParleyProtocol
import ParleyStore

/// The NATS subjects of one deployment: `parley.<deployment>.nodes` (heartbeats, announcements, closes; every node),
/// `parley.<deployment>.n.<node>` (one node's), `parley.<deployment>.c.<app>.<conversation>` (a conversation's events).
/// Ids that are not plain subject tokens (letters, digits, `_`, `-`) are written as `~` and their UTF-8 in hex.
struct ClusterSubjects: Sendable {
    let deploymentId: String
    let nodeId: String
    let prefix: String

    init(deploymentId: String, nodeId: String) {
        self.deploymentId = deploymentId
        self.nodeId = nodeId
        self.prefix = "parley." + Self.token(deploymentId)
    }

    var nodes: String { prefix + ".nodes" }
    var inbox: String { inbox(of: nodeId) }
    func inbox(of node: String) -> String { prefix + ".n." + Self.token(node) }
    func conversation(_ conversation: ConversationRef) -> String {
        prefix + ".c." + Self.token(conversation.appId) + "." + Self.token(conversation.conversationId)
    }

    static func token(_ id: String) -> String {
        let plain =
            !id.isEmpty && id.utf8.count <= 128
            && id.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || byte == 0x5F || byte == 0x2D
            }
        if plain { return id }
        let hex = id.utf8.map { byte in
            let digits = Array("0123456789abcdef".utf8)
            return String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 0xF)]], as: UTF8.self)
        }
        return "~" + hex.joined()
    }
}
