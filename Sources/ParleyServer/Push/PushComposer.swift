import Foundation
import ParleyProtocol

/// The APNs payload of a message push: the alert, the badge and Parley's ids for `handleNotification(userInfo:)`.
///
/// ```json
/// {"aps": {"alert": {"title": "Alice", "subtitle": "Team", "body": "See you at 5"}, "badge": 3,
///          "sound": "default", "thread-id": "<conversation id>"},
///  "parley": {"conversationId": "<conversation id>", "messageId": "<message id>", "seq": 12, "mentioned": true}}
/// ```
///
/// (`mentioned` only when the message mentions the recipient.)
enum PushComposer {
    /// Longest alert body, in UTF-8 bytes; longer text is cut at a character boundary and ends with "…". Keeps the
    /// payload well under APNs' 4 KB limit.
    static let maxBodyBytes = 1000
    /// Longest title or subtitle, in UTF-8 bytes.
    static let maxTitleBytes = 200

    struct Payload: Encodable {
        var aps: APS
        var parley: PushPayload
    }

    struct APS: Encodable {
        var alert: Alert
        var badge: Int
        var sound: String
        var threadId: String

        enum CodingKeys: String, CodingKey {
            case alert, badge, sound
            case threadId = "thread-id"
        }
    }

    struct Alert: Encodable {
        var title: String
        var subtitle: String?
        var body: String
    }

    /// - Parameters:
    ///   - message: The stored message.
    ///   - senderName: The sender's display name (the title).
    ///   - groupName: The group's name for a group conversation (the subtitle); nil for a direct one.
    ///   - badge: The recipient's unread count over all conversations.
    ///   - mentioned: Whether the message mentions the recipient (`parley.mentioned`).
    static func payload(message: Message, senderName: String, groupName: String?, badge: Int, mentioned: Bool = false)
        -> [UInt8]
    {
        let payload = Payload(
            aps: APS(
                alert: Alert(
                    title: truncated(senderName, maxBytes: maxTitleBytes),
                    subtitle: groupName.flatMap { $0.isEmpty ? nil : truncated($0, maxBytes: maxTitleBytes) },
                    body: truncated(body(of: message), maxBytes: maxBodyBytes)
                ),
                badge: badge, sound: "default", threadId: message.conversationId
            ),
            parley: PushPayload(
                conversationId: message.conversationId, messageId: message.id, seq: message.seq,
                mentioned: mentioned ? true : nil
            )
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding these plain structs cannot fail.
        return Array((try? encoder.encode(payload)) ?? Data())
    }

    /// The message's explicit alert, else its text, else what its files are ("Photo", "2 photos", "File: a.pdf",
    /// "3 files"), else a generic line (a message of data parts only).
    static func body(of message: Message) -> String {
        if let alert = message.alert, !alert.isEmpty { return alert }
        let text = message.text
        if !text.isEmpty { return text }
        let files = message.files
        guard let first = files.first else { return "New message" }
        if files.allSatisfy(\.isImage) { return files.count == 1 ? "Photo" : "\(files.count) photos" }
        return files.count == 1 ? "File: \(first.name)" : "\(files.count) files"
    }

    /// `text` cut to at most `maxBytes` UTF-8 bytes at a character boundary, "…" added when cut.
    static func truncated(_ text: String, maxBytes: Int) -> String {
        guard text.utf8.count > maxBytes else { return text }
        let ellipsis = "…"
        var result = ""
        var bytes = ellipsis.utf8.count
        for character in text {
            let size = character.utf8.count
            guard bytes + size <= maxBytes else { break }
            result.append(character)
            bytes += size
        }
        return result + ellipsis
    }
}
