import Foundation
import ParleyProtocol
import Testing

/// `WireJSON` replaces Foundation's encoder on the hot path: whatever it writes must decode exactly as the
/// Foundation-encoded form does, for every event payload kind and every server frame.
@Suite struct WireJSONTests {
    /// Text that needs escaping, or that an encoder could mangle: quotes, backslashes, every control character,
    /// slashes (not escaped on the wire), non-ASCII letters, emoji and combining sequences, U+2028/2029, NUL.
    static let awkwardStrings: [String] = [
        "", "plain", #"quote " and backslash \ and \" both"#, "slash / and </script>",
        String((0..<0x20).map { Character(Unicode.Scalar($0)) }), "\u{7F} DEL", "tab\tnew\nline\r\n",
        "héllo wörld ñ 日本語 العربية", "👩‍👩‍👧‍👦 🇫🇷 e\u{301}", "\u{2028}\u{2029}", "nul\u{0}inside", "\u{FEFF}bom",
        String(repeating: "long ", count: 2000),
    ]

    static let awkwardValues: [JSONValue] = [
        .null, true, false, 0, 1, -1, 42, 0.1, -2.5, 1e20, 1.5e-7, 123_456_789_012, .number(Double(Int64(1) << 53)),
        .string("é\"\\/\n"), [], [1, "two", nil, [3.5]], [:],
        ["a": 1, "nested": ["b": [true, nil], "emoji 😀": "x"], "": "empty key", "quote\"key": 0.25],
    ]

    func foundation(_ event: Event) throws -> Event {
        try WireCoding.decode(Event.self, from: WireCoding.encode(event))
    }

    func fast(_ event: Event) throws -> Event {
        let bytes = try WireJSON.encode(event)
        // Valid JSON on its own, not only for our decoder.
        _ = try JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])
        return try WireCoding.decode(Event.self, from: bytes)
    }

    func event(_ name: EventName, _ payload: EventPayload, durable: Bool = true, createdBy: String? = "alice") -> Event
    {
        Event(
            id: durable ? Event.durableID(conversationId: "c_1", seq: 7) : "c_1:read:bob:7", appId: "app_1",
            name: name, conversationId: durable ? "c_1" : nil, seq: durable ? 7 : nil, timestamp: 1_700_000_000_123,
            context: EventContext(createdBy: createdBy), payload: payload
        )
    }

    static func messages() -> [Message] {
        var messages = [
            Message(id: "m_1", conversationId: "c_1", seq: 1, sender: "alice", parts: [.text("hi")], sentAt: 1),
            Message(
                id: "m_2", conversationId: "c_1", seq: Int64.max, sender: "bob", clientMessageId: "client-1",
                parts: [.text("a"), .data(["k": "v"], name: "card"), MessagePart(type: .data, data: .null)],
                metadata: ["priority": 2, "tags": ["x", "y"]], alert: "Bob: a", sentAt: -1
            ),
            Message(id: "m_3", conversationId: "c_1", seq: 0, sender: "carol", parts: [], sentAt: 0),
            // Every field of a message's later life: a reply that mentions, edited, deleted, with reactions and a
            // thread summary.
            Message(
                id: "m_4", conversationId: "c_1", seq: 9, sender: "dave", parts: [.text("@bob")], sentAt: 3,
                replyTo: "m_1", mentions: ["bob", "quote\"d"], editedAt: 4, deletedAt: 5, deletedBy: "alice",
                replyCount: 2, lastReplyAt: 6,
                reactions: [
                    ReactionSummary(key: "👍", count: 3, reacted: true),
                    ReactionSummary(key: "a\"b", count: 1, reacted: false),
                ],
                pin: MessagePin(messageId: "m_4", messageSeq: 9, pinnedBy: "al\"ice", pinnedAt: -7), silent: true,
                system: false
            ),
            Message(
                id: "m_5", conversationId: "c_1", seq: 10, sender: "dave", parts: [], sentAt: 3, mentions: [],
                reactions: [], pin: MessagePin(messageId: "m_5", messageSeq: 10, pinnedBy: nil, pinnedAt: 1),
                silent: false, system: true),
        ]
        for (index, text) in awkwardStrings.enumerated() {
            messages.append(
                Message(
                    id: "m_\(text)", conversationId: "c_\(text)", seq: Int64(index), sender: text,
                    clientMessageId: text,
                    parts: [.text(text), .data(.string(text), name: text)], metadata: .object([text: .string(text)]),
                    alert: text, sentAt: Int64(index)
                )
            )
        }
        for value in awkwardValues {
            messages.append(
                Message(
                    id: "m_v", conversationId: "c_1", seq: 9, sender: "dave", parts: [.data(value)], metadata: value,
                    sentAt: 9
                )
            )
        }
        return messages
    }

    @Test func everyEventPayloadKindDecodesAsTheFoundationForm() throws {
        let user = User(
            uid: "alice", name: "Alïce \"A\"", avatarURL: "https://x/y.png", metadata: ["a": 1], createdAt: 1,
            updatedAt: 2)
        let conversation = Conversation(
            id: "c_1", type: .group, name: "Friends/Amis", description: "d\n", isPublic: true, metadata: ["m": [1, 2]],
            createdBy: "alice", createdAt: 1, updatedAt: 2, lastSeq: 3, participantCount: 4, deletedAt: 5
        )
        let participant = Participant(uid: "bob", role: .admin, joinedAt: 1, deliveredSeq: 2, readSeq: 3)
        var payloads: [(EventName, EventPayload)] = [
            (.profileUpdate, .profileUpdated(user)),
            (.conversationCreate, .conversationCreated(conversation)),
            (.conversationUpdate, .conversationUpdated(conversation)),
            (.conversationDelete, .conversationDeleted(conversation)),
            (.conversationUndelete, .conversationUndeleted(conversation)),
            (.participantAdded, .participantAdded(participant)),
            (.participantUpdated, .participantUpdated(participant)),
            (.participantRemoved, .participantRemoved(participant)),
            (.participantTyping, .participantTyping(TypingIndicator(uid: "bob"))),
            (.participantTypingOff, .participantTypingOff(TypingIndicator(uid: "bob"))),
            (.messageDelivered, .messageDelivered(Receipt(uid: "bob", seq: 6))),
            (.messageRead, .messageRead(Receipt(uid: "bob\u{1}\"", seq: 0))),
            (.messageRead, .messageRead(Receipt(uid: "bob", seq: 7, messageId: "m_\"7", timestamp: -3))),
            (
                .reactionAdded,
                .reactionAdded(MessageReaction(messageId: "m_1", messageSeq: 1, key: "👍", uid: "bob", count: 2))
            ),
            (
                .reactionRemoved,
                .reactionRemoved(MessageReaction(messageId: "m_1", messageSeq: 1, key: "x", uid: "b", count: 0))
            ),
            (
                .messagePinned,
                .messagePinned(MessagePin(messageId: "m_1", messageSeq: 1, pinnedBy: "bob", pinnedAt: 5))
            ),
            (
                .messageUnpinned,
                .messageUnpinned(MessagePin(messageId: "m_1", messageSeq: 1, pinnedBy: nil, pinnedAt: 5))
            ),
            (.presenceUpdate, .presenceUpdated(Presence(uid: "bob", online: false, lastSeenAt: 9))),
            (
                .unreadUpdate,
                .unreadUpdated(
                    UnreadSummary(
                        total: 2,
                        conversations: [ConversationUnread(conversationId: "c_1", unread: 2, readSeq: 1, lastSeq: 3)])
                )
            ),
            (.caughtUp, .caughtUp(CaughtUpFrame(userSeq: 3, conversations: ["c_1": 4], replayed: 5))),
            (
                .resyncRequired,
                .resyncRequired(ResyncFrame(conversationId: "c_1", reason: .conversationNotFound, lastSeq: 2))
            ),
            ("some.futureEvent", .unknown(["x": [1, "y"]])),
        ]
        payloads += Self.messages().map { (.messageSent, .messageSent($0)) }
        payloads += Self.messages().map { (.messageUpdate, .messageUpdated($0)) }
        payloads += Self.messages().map { (.messageDelete, .messageDeleted($0)) }
        // Every kind is covered (the unknown one included).
        #expect(Set(payloads.compactMap { $0.1.eventName }).count == 23)
        for (name, payload) in payloads {
            for createdBy in ["alice", nil, "quote\"d"] as [String?] {
                for durable in [true, false] {
                    let event = event(name, payload, durable: durable, createdBy: createdBy)
                    let expected = try foundation(event)
                    #expect(try fast(event) == expected, "\(name)")
                    #expect(try sameDocument(WireJSON.encode(event), WireCoding.encode(event)), "\(name)")
                }
            }
        }
    }

    @Test func ackFramesDecodeAsTheFoundationForm() throws {
        var frames: [ServerFrame] = [
            .ack(AckFrame(ref: "r")), .ack(AckFrame(ref: "r\"\\\n", duplicate: true)),
            .ack(
                AckFrame(
                    ref: "r", duplicate: false,
                    reactions: ReactionList(
                        messageId: "m\"", reactions: [ReactionSummary(key: "🎉", count: 1, reacted: true)])
                )
            ),
            .ack(AckFrame(ref: "r", reactions: ReactionList(messageId: "m", reactions: []))),
        ]
        for message in Self.messages() {
            frames.append(.ack(AckFrame(ref: message.sender, message: message, duplicate: false)))
        }
        for frame in frames {
            let bytes = try WireJSON.encode(frame)
            let expected = try WireCoding.decode(ServerFrame.self, from: WireCoding.encode(frame))
            #expect(try WireCoding.decode(ServerFrame.self, from: bytes) == expected)
            #expect(try sameDocument(bytes, WireCoding.encode(frame)))
        }
    }

    @Test func everyOtherServerFrameDecodesAsTheFoundationForm() throws {
        var frames: [ServerFrame] = [
            .pong(PongFrame(id: "1", serverTime: 6)), .pong(PongFrame(id: nil, serverTime: -6)),
            .error(ErrorFrame(code: .handshakeFailed, message: "")),
            .caughtUp(CaughtUpFrame(userSeq: 0, conversations: [:], replayed: 0)),
            .resync(ResyncFrame(conversationId: "c_1", reason: .historyTrimmed, lastSeq: 9)),
        ]
        for (index, text) in Self.awkwardStrings.enumerated() {
            let user = User(
                uid: text, name: text, avatarURL: index.isMultiple(of: 2) ? text : nil,
                metadata: Self.awkwardValues[index % Self.awkwardValues.count], createdAt: Int64(index), updatedAt: -1
            )
            frames += [
                .hello(
                    HelloFrame(
                        protocolVersion: 1, connectionId: text, appId: text, user: user, heartbeatIntervalMs: 30_000,
                        serverTime: Int64.max, tokenExpiresAt: index.isMultiple(of: 3) ? nil : Int64(index) * 1_000
                    )
                ),
                .error(ErrorFrame(ref: text, code: ErrorCode(rawValue: text), message: text)),
                .pong(PongFrame(id: text, serverTime: Int64(index))),
                .caughtUp(
                    CaughtUpFrame(
                        userSeq: Int64(index), conversations: [text: 1, "c_\(index)": Int64.max], replayed: index)),
            ]
        }
        for frame in frames {
            let bytes = try WireJSON.encode(frame)
            _ = try JSONSerialization.jsonObject(with: Data(bytes))
            let expected = try WireCoding.decode(ServerFrame.self, from: WireCoding.encode(frame))
            #expect(try WireCoding.decode(ServerFrame.self, from: bytes) == expected)
            #expect(try sameDocument(bytes, WireCoding.encode(frame)))
        }
    }

    /// The same JSON document: same keys (none added, none left out, `null` not confused with absent), same values.
    /// Not the same bytes: Foundation's key order on Linux changes from one encoding to the next.
    ///
    /// Compared as ``JSONValue``s, not as `NSDictionary`s: Foundation's `NSDictionary` on Linux takes two different keys
    /// of one object (among random strings with combining marks and U+FEFF) for the same one, and which of their
    /// values it keeps then depends on the key order, which changes from one process to the next.
    func sameDocument(_ left: [UInt8], _ right: [UInt8]) throws -> Bool {
        guard case .object = try WireCoding.decode(JSONValue.self, from: left) else { return false }
        return try WireCoding.decode(JSONValue.self, from: left) == WireCoding.decode(JSONValue.self, from: right)
    }

    /// For the kinds written by hand, the document is the one Foundation writes, so stored events keep their form.
    @Test func handWrittenKindsWriteTheDocumentFoundationWrites() throws {
        let message = Message(
            id: "m_2", conversationId: "c_1", seq: 12, sender: "bob", clientMessageId: "client-1",
            parts: [.text("a \"b\" / \\ \n é 😀 \u{1}"), .data(.string("s"), name: "n")],
            metadata: [1.5, 2, "x", nil, true],
            alert: "Bob: a", sentAt: 1_700_000_000_000
        )
        let events = [
            event(.messageSent, .messageSent(message)),
            event(.messageSent, .messageSent(message), durable: false, createdBy: nil),
            event(.messageRead, .messageRead(Receipt(uid: "bob", seq: 12)), durable: false),
            event(.messageDelivered, .messageDelivered(Receipt(uid: "bob", seq: 3))),
        ]
        for event in events {
            #expect(try sameDocument(WireJSON.encode(event), WireCoding.encode(event)))
        }
    }

    @Test func aNonFiniteNumberIsRefusedLikeFoundationDoes() {
        let message = Message(
            id: "m", conversationId: "c", seq: 1, sender: "a", parts: [], metadata: .number(.nan), sentAt: 1)
        #expect(throws: (any Error).self) { try WireCoding.encode(message) }
        #expect(throws: (any Error).self) { try WireJSON.encode(event(.messageSent, .messageSent(message))) }
    }

    /// Seeded random server frames, with the strings and values of ``ClientFrameDecodingTests``'s generator (control
    /// characters, NUL, C1, U+2028, emoji, kilobyte-long strings, every kind of number): what the fast encoder writes
    /// is valid JSON, decodes to the frame Foundation's encoding decodes to, and is the same document.
    @Test func randomServerFramesEncodeAsFoundationDoes() throws {
        typealias Random = ClientFrameDecodingTests
        var generator = Random.Generator(state: 0xF4A3)
        for index in 0..<1200 {
            let text = Random.string(&generator)
            let value = Random.value(&generator)
            func maybe<T>(_ make: (inout Random.Generator) -> T) -> T? {
                Bool.random(using: &generator) ? make(&generator) : nil
            }
            let message = Message(
                id: "m_\(index)", conversationId: text, seq: Int64.random(in: 0 ... .max, using: &generator),
                sender: text, clientMessageId: maybe(Random.string),
                parts: [.text(Random.string(&generator)), .data(value, name: Random.string(&generator))],
                metadata: maybe { Random.value(&$0) }, alert: maybe(Random.string),
                sentAt: Int64.random(in: .min ... .max, using: &generator), replyTo: maybe(Random.string),
                mentions: maybe { [Random.string(&$0), Random.string(&$0)] },
                editedAt: maybe { Int64.random(in: .min ... .max, using: &$0) },
                deletedAt: maybe { Int64.random(in: .min ... .max, using: &$0) }, deletedBy: maybe(Random.string),
                replyCount: maybe { Int.random(in: 0...Int.max, using: &$0) },
                lastReplyAt: maybe { Int64.random(in: .min ... .max, using: &$0) },
                reactions: maybe {
                    [
                        ReactionSummary(
                            key: Random.string(&$0), count: Int.random(in: 0...9, using: &$0),
                            reacted: Bool.random(using: &$0))
                    ]
                }
            )
            let frames: [ServerFrame] = [
                .event(EventFrame(event: event(.messageSent, .messageSent(message)))),
                .event(EventFrame(event: event(.messageUpdate, .messageUpdated(message)))),
                .ack(AckFrame(ref: text, message: message, duplicate: Bool.random(using: &generator))),
                .error(
                    ErrorFrame(
                        ref: Bool.random(using: &generator) ? text : nil,
                        code: ErrorCode(rawValue: Random.string(&generator)), message: Random.string(&generator),
                        retryAfterMs: Bool.random(using: &generator)
                            ? Int64.random(in: 0 ... .max, using: &generator) : nil
                    )
                ),
                .pong(
                    PongFrame(
                        id: Bool.random(using: &generator) ? text : nil,
                        serverTime: Int64.random(in: .min ... .max, using: &generator)
                    )
                ),
                .caughtUp(CaughtUpFrame(userSeq: Int64(index), conversations: [text: Int64(index)], replayed: index)),
            ]
            for frame in frames {
                let bytes = try WireJSON.encode(frame)
                _ = try JSONSerialization.jsonObject(with: Data(bytes))
                let expected = try WireCoding.decode(ServerFrame.self, from: WireCoding.encode(frame))
                #expect(try WireCoding.decode(ServerFrame.self, from: bytes) == expected, "\(frame)")
                #expect(try sameDocument(bytes, WireCoding.encode(frame)), "\(frame)")
            }
        }
    }
}
