import Foundation
import ParleyProtocol
import ParleyStore
import ParleyTesting
import Testing

@testable import ParleyServer

/// Messages that carry uploads (docs/PROTOCOL.md, "Attachments"): the `file` part names an upload by id, the server
/// fills it in, participants get links once a message carries it, and a deleted message's files go.
@Suite(.timeLimit(.minutes(2))) struct FileMessageTests {
    static func filePart(_ id: String, preview: String? = nil) -> String {
        let preview = preview.map { #","preview":"\#($0)""# } ?? ""
        return #"{"type":"file","file":{"id":"\#(id)"\#(preview)}}"#
    }

    @Test(arguments: FileTransferTests.storages) func aFilePartTravelsFilledInAndOpensTheFileToParticipants(
        _ storage: FileTransferTests.Storage
    ) async throws {
        let server = try #require(try await FileTransferTests.server(storage))
        let alice = try await server.login("alice")
        let bob = try await server.login("bob")
        _ = try await server.login("carol")
        let conversation = try await server.createConversation(token: alice, with: ["bob"])
        let bytes = FileTransferTests.png(width: 3, height: 2)
        let uploaded = try await FileTransferTests.upload(
            server, conversation: conversation.id, token: alice, name: "cat.png", type: "image/png", bytes: bytes
        )
        let attachment = try WireCoding.decode(Attachment.self, from: uploaded.body)
        let linkPath = "/v1/conversations/\(conversation.id)/attachments/\(attachment.id)"
        // Until a message carries it, the upload is the uploader's alone.
        let early = try await server.request("GET", linkPath, token: bob)
        #expect(early.status == 404 && early.errorCode == .attachmentNotFound)
        #expect(try await server.request("GET", linkPath, token: alice).status == 200)

        // Alice sends it over the socket, naming the id and a preview; Bob receives it filled in.
        let bobSocket = WebSocketProbe(url: server.webSocketURL, token: bob)
        let aliceSocket = WebSocketProbe(url: server.webSocketURL, token: alice)
        _ = try await bobSocket.nextFrame { if case .hello = $0 { true } else { false } }
        _ = try await aliceSocket.nextFrame { if case .hello = $0 { true } else { false } }
        await aliceSocket.send(
            #"{"type":"send","ref":"r1","conversationId":"\#(conversation.id)","clientMessageId":"k1","parts":["#
                + #"{"type":"text","text":"look"},\#(Self.filePart(attachment.id, preview: "LKO2?U%2Tw=w"))]}"#
        )
        let expected = FileInfo(attachment, preview: "LKO2?U%2Tw=w")
        guard case .ack(let ack) = try await aliceSocket.nextFrame(where: { if case .ack = $0 { true } else { false } })
        else { throw FileMessageError.unexpected }
        #expect(ack.message?.files == [expected])
        guard
            case .event(let frame) = try await bobSocket.nextFrame(where: {
                if case .event(let frame) = $0 { frame.event.name == .messageSent } else { false }
            })
        else { throw FileMessageError.unexpected }
        let received = try #require(frame.event.payload.message)
        #expect(received.files == [expected] && received.text == "look")
        #expect(expected.width == 3 && expected.height == 2 && expected.contentType == "image/png")
        let history: MessagePage = try await server.request(
            "GET", "/v1/conversations/\(conversation.id)/messages", token: bob
        ).decode()
        #expect(history.messages.first?.files == [expected])

        // Now Bob gets a link and the bytes; Carol, not a participant, does not.
        let link: AttachmentLink = try await server.request("GET", linkPath, token: bob).decode()
        #expect(try await FileTransferTests.http(server, "GET", link.url).body == bytes)
        #expect(try await server.request("GET", linkPath, token: try await server.login("carol")).status == 404)

        // The upload is taken: another message may not carry it, nor may Bob name Alice's upload.
        let again = try await server.request(
            "POST", "/v1/conversations/\(conversation.id)/messages", token: alice,
            body: SendMessageRequest(parts: [.file(attachment)])
        )
        #expect(again.status == 409 && again.errorCode == .attachmentInUse)
        let bobs = try await server.request(
            "POST", "/v1/conversations/\(conversation.id)/messages", token: bob,
            body: SendMessageRequest(parts: [.file(attachment)])
        )
        #expect(bobs.status == 404 && bobs.errorCode == .attachmentNotFound)
        // A part that says it is a file but names none, a file on a text part, an oversized preview: 400 or 413.
        for (parts, code) in [
            (#"[{"type":"file"}]"#, ErrorCode.badRequest),
            (#"[{"type":"text","text":"x","file":{"id":"f_1"}}]"#, .badRequest),
            ("[\(Self.filePart("f_1", preview: String(repeating: "p", count: 16 * 1024 + 1)))]", .fieldTooLarge),
        ] {
            await aliceSocket.send(
                #"{"type":"send","ref":"bad","conversationId":"\#(conversation.id)","parts":\#(parts)}"#)
            guard
                case .error(let error) = try await aliceSocket.nextFrame(where: {
                    if case .error = $0 { true } else { false }
                })
            else { throw FileMessageError.unexpected }
            #expect(error.ref == "bad" && error.code == code, "\(parts)")
        }

        // Deleting the message removes its file: no link, the old link fails, the sweeper takes the bytes.
        let deleted = try await server.request(
            "DELETE", "/v1/conversations/\(conversation.id)/messages/\(received.id)", token: alice
        )
        #expect(deleted.status == 200)
        #expect(try await server.request("GET", linkPath, token: bob).status == 404)
        let stale = try await FileTransferTests.http(server, "GET", link.url)
        #expect(stale.status == 404 && FileTransferTests.code(stale.body) == "ERR_ATTACHMENT_NOT_FOUND")
        #expect(await server.application.uploadSweeper.sweep() == 1)
        #expect(try await server.store.attachment(appId: server.app.appId, id: attachment.id) == nil)
        await aliceSocket.close()
        await bobSocket.close()
        try await server.stop()
    }

    /// The operator sets a limit below the server's: larger uploads are refused from their head; 0 lifts it.
    @Test func anAppsOwnUploadLimitRefusesLargerFiles() async throws {
        let server = try #require(try await FileTransferTests.server(.disk))
        let alice = try await server.login("alice")
        let conversation = try await server.createConversation(token: alice, with: [])
        let key = server.app.restAPIKey
        let settings: AppOverview = try await server.request("GET", "/v1/app", apiKey: key).decode()
        #expect(settings.maxFileBytes == server.configuration.files.maxFileBytes && !settings.hasOwnFileLimit)
        let limited: AppOverview = try await server.request(
            "PATCH", "/v1/app", apiKey: key, body: UpdateAppSettingsRequest(maxFileBytes: 1000)
        ).decode()
        #expect(limited.maxFileBytes == 1000 && limited.hasOwnFileLimit)
        let bytes = FileTransferTests.randomBytes(1001)
        let over = try await FileTransferTests.upload(server, conversation: conversation.id, token: alice, bytes: bytes)
        #expect(over.status == 413 && FileTransferTests.code(over.body) == "ERR_FILE_TOO_LARGE")
        let within = try await FileTransferTests.upload(
            server, conversation: conversation.id, token: alice, bytes: Array(bytes.prefix(1000)))
        #expect(within.status == 201)
        // Above the server's limit, or negative: refused. 0: the server's limit again.
        for value in [server.configuration.files.maxFileBytes + 1, -1] {
            let refused = try await server.request(
                "PATCH", "/v1/app", apiKey: key, body: UpdateAppSettingsRequest(maxFileBytes: value))
            #expect(refused.status == 400, "\(value)")
        }
        let lifted: AppOverview = try await server.request(
            "PATCH", "/v1/app", apiKey: key, body: UpdateAppSettingsRequest(maxFileBytes: 0)
        ).decode()
        #expect(lifted.maxFileBytes == server.configuration.files.maxFileBytes && !lifted.hasOwnFileLimit)
        #expect(
            try await FileTransferTests.upload(server, conversation: conversation.id, token: alice, bytes: bytes).status
                == 201)
        try await server.stop()
    }

    @Test func pushAlertsSayWhatTheFilesAre() {
        func message(_ parts: [MessagePart], alert: String? = nil) -> Message {
            Message(id: "m", conversationId: "c", seq: 1, sender: "a", parts: parts, alert: alert, sentAt: 1)
        }
        func file(_ name: String, image: Bool) -> MessagePart {
            MessagePart(
                type: .file,
                file: FileInfo(
                    id: "f_\(name)", name: name, contentType: image ? "image/jpeg" : "application/pdf", size: 1,
                    sha256: "", width: image ? 10 : nil, height: image ? 10 : nil
                )
            )
        }
        #expect(PushComposer.body(of: message([file("a.jpg", image: true)])) == "Photo")
        #expect(PushComposer.body(of: message([file("a.jpg", image: true), file("b.jpg", image: true)])) == "2 photos")
        #expect(PushComposer.body(of: message([file("report.pdf", image: false)])) == "File: report.pdf")
        #expect(PushComposer.body(of: message([file("a.jpg", image: true), file("r.pdf", image: false)])) == "2 files")
        #expect(PushComposer.body(of: message([.text("see this"), file("r.pdf", image: false)])) == "see this")
        #expect(PushComposer.body(of: message([file("r.pdf", image: false)], alert: "Invoice")) == "Invoice")
    }
}

enum FileMessageError: Error {
    case unexpected
}
