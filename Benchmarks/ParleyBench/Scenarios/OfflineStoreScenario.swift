import ArgumentParser
import Foundation
import Logging
import Parley
import ParleyProtocol

/// `offline-store`: the SDK's offline store (docs/SDK.md, "Offline") on this machine's disk, no server. Fills one
/// conversation with `--messages` messages (a page read from the server, then `--journal` events after it: edits,
/// reactions and new messages, as a day of use leaves them), then opens it `--opens` times as a relaunched app does
/// (a new store: its inbox, the conversation's snapshot and journal), and reports how long an open takes.
struct OfflineStoreScenario: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "offline-store",
        abstract: "Time to open a conversation kept by the SDK's offline store (no server)."
    )

    @Option(help: "Messages kept in the conversation (the store's limit).")
    var messages: Int = 200

    @Option(help: "Events journaled after the snapshot (below --messages, which folds the journal).")
    var journal: Int = 150

    @Option(help: "Opens measured.")
    var opens: Int = 200

    @Option(help: "Write the figures as JSON to this file.")
    var json: String?

    struct Figures: Codable, Sendable {
        var messages: Int
        var journaledEvents: Int
        var bytesOnDisk: Int
        var openMillisecondsP50: Double
        var openMillisecondsP99: Double
        var openMillisecondsMax: Double
        var recordMicrosecondsPerEvent: Double
    }

    func run() async throws {
        guard messages > 0, journal >= 0, journal < messages, opens > 0 else {
            throw ValidationError("--messages > 0, 0 <= --journal < --messages, --opens > 0")
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("parley-offline-bench-\(UUID())")
        defer { try? FileManager.default.removeItem(at: folder) }
        let logger = Logger(label: "parley.bench")
        let conversationId = "c_bench"
        let writer = OfflineStore(directory: folder, appId: "bench", limit: messages, logger: logger)
        writer.begin(uid: "reader")
        let senders = ["alice", "bob", "carol", "reader"]
        var page: [Message] = []
        for seq in 1...Int64(messages) {
            page.append(
                Self.message(seq: seq, sender: senders[Int(seq) % senders.count], conversationId: conversationId))
        }
        writer.merge(MessagePage(messages: page, lastSeq: Int64(messages)), of: conversationId)

        // A day of use after the page: a third new messages, a third edits, a third reactions.
        var seq = Int64(messages)
        let recordStart = Monotonic.nanoseconds()
        for index in 0..<journal {
            seq += 1
            let payload: EventPayload
            let name: EventName
            switch index % 3 {
            case 0:
                name = .messageSent
                payload = .messageSent(Self.message(seq: seq, sender: "alice", conversationId: conversationId))
            case 1:
                var edited = page[page.count - 1 - index % 50]
                edited.parts = [.text("edited \(index): " + String(repeating: "x", count: 40))]
                edited.editedAt = 1_800_000_000_000 + seq
                name = .messageUpdate
                payload = .messageUpdated(edited)
            default:
                let target = page[page.count - 1 - index % 50]
                name = .reactionAdded
                payload = .reactionAdded(
                    MessageReaction(
                        messageId: target.id, messageSeq: target.seq, key: "👍", uid: "bob", count: 1 + index)
                )
            }
            writer.record(
                Event(
                    id: "\(name.rawValue):\(seq)", appId: "bench", name: name, conversationId: conversationId, seq: seq,
                    timestamp: 1_800_000_000_000 + seq, context: EventContext(createdBy: "alice"), payload: payload
                ))
        }
        let recordMicroseconds = Monotonic.seconds(since: recordStart) * 1_000_000 / Double(max(1, journal))

        var durations: [Double] = []
        for _ in 0..<opens {
            let start = Monotonic.nanoseconds()
            let store = OfflineStore(directory: folder, appId: "bench", limit: messages, logger: logger)
            store.begin(uid: "reader")
            let read = store.messages(conversationId: conversationId)
            durations.append(Monotonic.seconds(since: start) * 1000)
            guard read.count == messages else {
                throw ValidationError("read \(read.count) messages, expected \(messages)")
            }
        }
        durations.sort()
        let bytes = try FileManager.default.subpathsOfDirectory(atPath: folder.path).reduce(0) { total, name in
            let size = try FileManager.default.attributesOfItem(atPath: folder.appendingPathComponent(name).path)[.size]
            return total + ((size as? Int) ?? 0)
        }
        let figures = Figures(
            messages: messages, journaledEvents: journal, bytesOnDisk: bytes,
            openMillisecondsP50: durations[durations.count / 2],
            openMillisecondsP99: durations[min(durations.count - 1, durations.count * 99 / 100)],
            openMillisecondsMax: durations.last ?? 0, recordMicrosecondsPerEvent: recordMicroseconds
        )
        print(
            "offline-store: messages=\(messages) journal=\(journal) bytes=\(bytes) open p50=\(Format.fixed(figures.openMillisecondsP50, 2))ms "
                + "p99=\(Format.fixed(figures.openMillisecondsP99, 2))ms max=\(Format.fixed(figures.openMillisecondsMax, 2))ms "
                + "record=\(Format.fixed(recordMicroseconds, 1))us/event"
        )
        if let json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            try encoder.encode(figures).write(to: URL(fileURLWithPath: json))
        }
    }

    /// A message as chats have them: a sentence or two, some with a reply or a reaction.
    static func message(seq: Int64, sender: String, conversationId: String) -> Message {
        let words = ["sure", "see you at", "the build", "is green", "lunch?", "ok", "sounds good", "tomorrow", "👍"]
        let text = (0..<(3 + Int(seq) % 12)).map { words[(Int(seq) + $0) % words.count] }.joined(separator: " ")
        return Message(
            id: "m_\(seq)", conversationId: conversationId, seq: seq, sender: sender,
            clientMessageId: UUID().uuidString,
            parts: [.text(text)], sentAt: 1_800_000_000_000 + seq * 1000, replyTo: seq % 10 == 0 ? "m_\(seq - 3)" : nil,
            reactions: seq % 7 == 0 ? [ReactionSummary(key: "❤️", count: 2, reacted: false)] : nil
        )
    }
}
