import Foundation
import ParleyProtocol
import ParleyServer
import ParleyTesting
import Testing
import Yams

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The OpenAPI document is the source of truth. The routes are generated from it; these tests fail when the
/// hand-written types drift from its schemas, or when the server answers a status the document does not declare.
@Suite struct OpenAPIDocumentTests {
    static let documentURL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Sources/ParleyAPI/openapi.yaml")

    let document: [String: Any]
    let validator: SchemaValidator

    init() throws {
        let text = try String(contentsOf: Self.documentURL, encoding: .utf8)
        document = try #require(try Yams.load(yaml: text) as? [String: Any])
        validator = SchemaValidator(document: document)
    }

    /// Every schema of the document, with a value of its Swift type: complete (every optional field set) and
    /// minimal. The complete one must use every property the schema declares; both must validate.
    static let samples: [(schema: String, complete: any Encodable & Sendable, minimal: any Encodable & Sendable)] = {
        let user = User(
            uid: "alice", name: "Alice", avatarURL: "https://x/a.png", metadata: ["k": 1], createdAt: 1, updatedAt: 2,
            deactivatedAt: 3)
        let bareUser = User(uid: "bob", name: "bob", createdAt: 1, updatedAt: 1)
        let participant = Participant(
            uid: "alice", role: .owner, joinedAt: 1, deliveredSeq: 2, readSeq: 1, muted: true, mutedUntil: 9
        )
        let permissions = RolePermissions(
            canSend: true, canAddParticipants: false, canRemoveParticipants: true, canEditOthersMessages: false,
            canDeleteOthersMessages: true, canPinMessages: false
        )
        let permissionsChange = RolePermissionsChange(
            canSend: false, canAddParticipants: true, canRemoveParticipants: false, canEditOthersMessages: true,
            canDeleteOthersMessages: false, canPinMessages: true
        )
        let rolesChange = ConversationRolesChange(
            owner: permissionsChange, admin: permissionsChange, member: permissionsChange)
        let conversation = Conversation(
            id: "c_1", type: .group, name: "G", description: "d", isPublic: true, metadata: ["k": "v"],
            createdBy: "alice",
            createdAt: 1, updatedAt: 2, lastSeq: 3, participantCount: 2, deletedAt: 4, participants: [participant]
        )
        let bareConversation = Conversation(
            id: "c_2", type: .direct, createdBy: "a", createdAt: 1, updatedAt: 1, lastSeq: 0, participantCount: 2)
        let attachment = Attachment(
            id: "f_1", conversationId: "c_1", uploader: "alice", name: "cat.png", contentType: "image/png", size: 9,
            sha256: "ab", width: 3, height: 2, createdAt: 1
        )
        let bareAttachment = Attachment(
            id: "f_2", conversationId: "c_1", uploader: "alice", name: "a.txt", contentType: "text/plain", size: 1,
            sha256: "cd", createdAt: 1
        )
        let file = FileInfo(attachment, preview: "LKO2?U%2Tw=w")
        // Every field set (a real part has either text, data or a file).
        let part = MessagePart(type: .data, text: "t", data: ["lat": 1.5], name: "location", file: file)
        let reaction = ReactionSummary(key: "👍", count: 2, reacted: true)
        let message = Message(
            id: "m_1", conversationId: "c_1", seq: 4, sender: "alice", clientMessageId: "x", parts: [part],
            metadata: ["a": true],
            alert: "New message", sentAt: 5, replyTo: "m_0", mentions: ["bob"], editedAt: 6, deletedAt: 7,
            deletedBy: "alice",
            replyCount: 2, lastReplyAt: 8, reactions: [reaction],
            pin: MessagePin(messageId: "m_1", messageSeq: 4, pinnedBy: "alice", pinnedAt: 9), silent: true,
            system: false
        )
        let bareMessage = Message(
            id: "m_2", conversationId: "c_1", seq: 5, sender: "bob", parts: [.text("hi")], sentAt: 6)
        let token = AuthTokenInfo(id: "tok_1", uid: "alice", createdAt: 1, expiresAt: 2)
        let webhook = WebhookEndpoint(
            id: "wh_1", url: "https://e.com/h", events: ["messages"], description: "d", enabled: false,
            disabledReason: "r", disabledAt: 3, consecutiveFailures: 2, lastSuccessAt: 1, lastFailureAt: 2,
            createdAt: 1,
            updatedAt: 3
        )
        let minimalWebhook = WebhookEndpoint(
            id: "wh_1", url: "https://e.com/h", events: ["users"], enabled: true, createdAt: 1, updatedAt: 1
        )
        let delivery = WebhookDelivery(
            id: "dlv_1", webhookId: "wh_1", event: .messageSent, conversationId: "c", state: .pending, attempts: 1,
            nextAttemptAt: 5, lastStatus: 500, lastError: "HTTP 500", lastAttemptAt: 4, createdAt: 1
        )
        let minimalDelivery = WebhookDelivery(
            id: "dlv_1", webhookId: "wh_1", event: .messageSent, state: .failed, attempts: 12, createdAt: 1
        )
        let ban = ConversationBan(
            conversationId: "c_1", uid: "bob", bannedBy: "alice", reason: "spam", until: 9, createdAt: 1
        )
        let device = Device(
            deviceId: "phone", platform: .apns, token: "ab12", environment: .production, createdAt: 1, updatedAt: 2)
        return [
            (
                "ErrorResponse", ErrorResponse(code: .rateLimited, message: "later", retryAfterMs: 250),
                ErrorResponse(code: .forbidden, message: "no")
            ),
            ("HealthStatus", HealthStatus(status: "ok"), HealthStatus(status: "ok")),
            ("AppInfo", AppInfo(id: "a", name: "n"), AppInfo(id: "a", name: "n")),
            (
                "LoginRequest", LoginRequest(appId: "a", uid: "u", authKey: "k"),
                LoginRequest(appId: "a", uid: "u", authKey: "k")
            ),
            ("LoginResponse", LoginResponse(user: user, authToken: "t"), LoginResponse(user: bareUser, authToken: "t")),
            ("User", user, bareUser),
            (
                "CreateUserRequest", CreateUserRequest(uid: "u", name: "n", avatarURL: "x", metadata: 1),
                CreateUserRequest(uid: "u")
            ),
            (
                "UpdateUserRequest", UpdateUserRequest(name: "n", avatarURL: "x", metadata: ["x": 1]),
                UpdateUserRequest()
            ),
            ("IssueAuthTokenRequest", IssueAuthTokenRequest(ttlSeconds: 60), IssueAuthTokenRequest()),
            ("AuthTokenInfo", token, AuthTokenInfo(id: "tok_2", uid: "bob", createdAt: 1)),
            (
                "IssuedAuthToken", IssuedAuthToken(authToken: "pt_x", token: token),
                IssuedAuthToken(authToken: "pt_x", token: token)
            ),
            ("AuthTokenList", AuthTokenList(tokens: [token]), AuthTokenList(tokens: [])),
            ("ConversationType", ConversationType.group, ConversationType.direct),
            ("Conversation", conversation, bareConversation),
            (
                "CreateConversationRequest",
                CreateConversationRequest(
                    type: .group, participants: ["b"], name: "n", description: "d", isPublic: true, metadata: ["x": 1],
                    roles: rolesChange
                ),
                CreateConversationRequest(type: .direct, participants: ["b"])
            ),
            (
                "ConversationList", ConversationList(conversations: [conversation], nextCursor: "c"),
                ConversationList(conversations: [])
            ),
            ("InboxSort", InboxSort.unread, InboxSort.activity),
            (
                "InboxEntry",
                InboxEntry(
                    conversation: conversation, lastMessage: message, unread: 2, unreadMentions: 1,
                    membership: participant, otherMember: user, archived: true, lastActivityAt: 9
                ),
                InboxEntry(
                    conversation: bareConversation, lastMessage: nil, unread: 0, unreadMentions: 0,
                    membership: Participant(uid: "bob", role: .member, joinedAt: 1), otherMember: nil, archived: false,
                    lastActivityAt: 1
                )
            ),
            (
                "InboxPage",
                InboxPage(
                    entries: [
                        InboxEntry(
                            conversation: conversation, lastMessage: message, unread: 2, unreadMentions: 1,
                            membership: participant, otherMember: user, archived: false, lastActivityAt: 1
                        )
                    ], totalUnread: 3, nextCursor: "a1.2"
                ),
                InboxPage(entries: [], totalUnread: 0)
            ),
            ("ParticipantRole", ParticipantRole.admin, ParticipantRole.member),
            ("Participant", participant, Participant(uid: "bob", role: .member, joinedAt: 1)),
            (
                "AddParticipantsRequest", AddParticipantsRequest(participants: [.init(uid: "b", role: .admin)]),
                AddParticipantsRequest(participants: [.init(uid: "b")])
            ),
            ("ParticipantList", ParticipantList(participants: [participant]), ParticipantList(participants: [])),
            ("MessagePart", part, MessagePart.text("hi")),
            ("FileInfo", file, FileInfo(bareAttachment)),
            ("Attachment", attachment, bareAttachment),
            (
                "AttachmentLink", AttachmentLink(attachment: attachment, url: "/v1/files/a/f_1?x", expiresAt: 9),
                AttachmentLink(attachment: bareAttachment, url: "/v1/files/a/f_2?x", expiresAt: 9)
            ),
            ("Message", message, bareMessage),
            (
                "SendMessageRequest",
                SendMessageRequest(
                    clientMessageId: "x", parts: [part], metadata: ["m": 1], alert: "a", replyTo: "m_0",
                    mentions: ["bob"], silent: true),
                SendMessageRequest(parts: [.text("hi")])
            ),
            (
                "EditMessageRequest", EditMessageRequest(parts: [part], metadata: ["m": 2], mentions: ["bob"]),
                EditMessageRequest(parts: [.text("fixed")])
            ),
            (
                "MessagePage",
                MessagePage(messages: [message], nextCursor: "4", newerCursor: "9", lastSeq: 9, parent: message),
                MessagePage(messages: [])
            ),
            ("TextRange", TextRange(start: 4, length: 9), TextRange(start: 0, length: 0)),
            (
                "SearchSnippet", SearchSnippet(text: "…the report", matches: [TextRange(start: 5, length: 6)]),
                SearchSnippet(text: "hi", matches: [])
            ),
            (
                "MessageSearchResult",
                MessageSearchResult(message: message, snippet: SearchSnippet(text: "t", matches: [])),
                MessageSearchResult(message: bareMessage, snippet: nil)
            ),
            (
                "MessageSearchResults",
                MessageSearchResults(
                    results: [
                        MessageSearchResult(
                            message: message,
                            snippet: SearchSnippet(text: "t", matches: [TextRange(start: 0, length: 1)])
                        )
                    ],
                    nextCursor: "p12"
                ),
                MessageSearchResults(results: [])
            ),
            ("ReactionSummary", reaction, ReactionSummary(key: "+1", count: 1, reacted: false)),
            (
                "ReactionList", ReactionList(messageId: "m_1", reactions: [reaction]),
                ReactionList(messageId: "m_1", reactions: [])
            ),
            ("DeletedUserMessages", DeletedUserMessages.erase, DeletedUserMessages.tombstone),
            (
                "UserDeletion", UserDeletion(user: user, messages: .erase, conversationsLeft: 2, messagesDeleted: 9),
                UserDeletion(user: bareUser, messages: .tombstone, conversationsLeft: 0, messagesDeleted: 0)
            ),
            (
                "UserMembership", UserMembership(conversation: conversation, participant: participant),
                UserMembership(conversation: bareConversation, participant: participant)
            ),
            (
                "UserExportPage",
                UserExportPage(
                    user: user, memberships: [UserMembership(conversation: conversation, participant: participant)],
                    messages: [message], nextCursor: "x1.2"
                ),
                UserExportPage(user: bareUser, messages: [])
            ),
            (
                "MessagePin", MessagePin(messageId: "m_1", messageSeq: 4, pinnedBy: "alice", pinnedAt: 9),
                MessagePin(messageId: "m_1", messageSeq: 4, pinnedBy: nil, pinnedAt: 9)
            ),
            ("RolePermissions", permissions, permissions),
            ("ConversationRoles", ConversationRoles.defaults, ConversationRoles.defaults),
            ("RolePermissionsChange", permissionsChange, RolePermissionsChange()),
            ("ConversationRolesChange", rolesChange, ConversationRolesChange()),
            (
                "Event",
                Event(
                    id: "c_1:4", appId: "a", name: .messageSent, conversationId: "c_1", seq: 4, timestamp: 5,
                    context: EventContext(createdBy: "alice"), payload: .messageSent(message)
                ),
                Event(
                    id: "e", appId: "a", name: .presenceUpdate, timestamp: 5, context: EventContext(),
                    payload: .presenceUpdated(Presence(uid: "a", online: true)))
            ),
            ("EventPage", EventPage(events: [], nextCursor: "4"), EventPage(events: [])),
            ("JSONValue", JSONValue.object(["any": [1, "two", nil]]), JSONValue.null),
            (
                "UpdateConversationRequest",
                UpdateConversationRequest(
                    name: "n", description: "d", isPublic: true, metadata: ["a": 1], roles: rolesChange),
                UpdateConversationRequest()
            ),
            (
                "UpdateParticipantRequest", UpdateParticipantRequest(role: .admin),
                UpdateParticipantRequest(role: .member)
            ),
            ("ReceiptRequest", ReceiptRequest(deliveredSeq: 3, readSeq: 2), ReceiptRequest()),
            (
                "ConversationUnread", ConversationUnread(conversationId: "c", unread: 2, readSeq: 1, lastSeq: 5),
                ConversationUnread(conversationId: "c", unread: 0, readSeq: 0, lastSeq: 0)
            ),
            (
                "UnreadSummary",
                UnreadSummary(
                    total: 2,
                    conversations: [ConversationUnread(conversationId: "c", unread: 2, readSeq: 1, lastSeq: 5)]),
                UnreadSummary(total: 0, conversations: [])
            ),
            ("Presence", Presence(uid: "a", online: false, lastSeenAt: 9), Presence(uid: "a", online: true)),
            ("ErrorCode", ErrorCode.badRequest, ErrorCode.internalError),
            ("PushPlatform", PushPlatform.apns, PushPlatform.apns),
            ("PushEnvironment", PushEnvironment.production, PushEnvironment.sandbox),
            (
                "RegisterDeviceRequest", RegisterDeviceRequest(platform: .apns, token: "ab12", environment: .sandbox),
                RegisterDeviceRequest(token: "ab12", environment: .production)
            ),
            ("Device", device, device),
            ("DeviceList", DeviceList(devices: [device]), DeviceList(devices: [])),
            ("BlockedUser", BlockedUser(uid: "bob", blockedAt: 3), BlockedUser(uid: "bob", blockedAt: 3)),
            ("BlockList", BlockList(blocks: [BlockedUser(uid: "bob", blockedAt: 3)]), BlockList(blocks: [])),
            ("ReportReason", ReportReason.selfHarm, ReportReason.other),
            ("ReportState", ReportState.resolved, ReportState.open),
            ("UserDirectoryVisibility", UserDirectoryVisibility.contacts, UserDirectoryVisibility.everyone),
            ("MuteRequest", MuteRequest(until: 5), MuteRequest()),
            ("BanRequest", BanRequest(until: 5, reason: "spam"), BanRequest()),
            ("ConversationBan", ban, ConversationBan(conversationId: "c", uid: "bob", createdAt: 1)),
            ("BanList", BanList(bans: [ban]), BanList(bans: [])),
            (
                "AppOverview",
                AppOverview(
                    appId: "a", name: "A", createdAt: 1, allowedOrigins: ["https://x.example"], maxFileBytes: 10,
                    hasOwnFileLimit: true, userDirectory: .contacts, deletedUserMessages: .erase,
                    stats: AppStats(users: 1, conversations: 2, liveConnections: 3, connectedUsers: 1, onlineUsers: 1)
                ),
                AppOverview(
                    appId: "a", name: "A", createdAt: 1, allowedOrigins: [], maxFileBytes: 1,
                    stats: AppStats(users: 0, conversations: 0, liveConnections: 0, connectedUsers: 0, onlineUsers: 0)
                )
            ),
            (
                "AppStats", AppStats(users: 1, conversations: 2, liveConnections: 3, connectedUsers: 1, onlineUsers: 1),
                AppStats(users: 0, conversations: 0, liveConnections: 0, connectedUsers: 0, onlineUsers: 0)
            ),
            (
                "UpdateAppSettingsRequest",
                UpdateAppSettingsRequest(
                    allowedOrigins: ["*"], maxFileBytes: 0, userDirectory: .everyone, deletedUserMessages: .tombstone),
                UpdateAppSettingsRequest()
            ),
            (
                "AppKeys", AppKeys(appId: "a", authKey: "ak_1", restAPIKey: "rk_1"),
                AppKeys(appId: "a", authKey: "ak_1", restAPIKey: "rk_1")
            ),
            ("UserList", UserList(users: [user], nextCursor: "bob"), UserList(users: [])),
            (
                "CreateReportRequest",
                CreateReportRequest(conversationId: "c", messageId: "m", uid: "u", reason: .spam, details: "d"),
                CreateReportRequest(reason: .other)
            ),
            (
                "Report",
                Report(
                    id: "r", reporter: "a", uid: "b", conversationId: "c", messageId: message.id, message: message,
                    reason: .harassment, details: "d", state: .resolved, resolution: "done", createdAt: 1, resolvedAt: 2
                ),
                Report(id: "r", reporter: "a", uid: "b", reason: .spam, state: .open, createdAt: 1)
            ),
            (
                "ReportList",
                ReportList(
                    reports: [
                        Report(
                            id: "r", reporter: "a", uid: "b", conversationId: "c", messageId: message.id,
                            message: message, reason: .spam, details: "d", state: .resolved, resolution: "done",
                            createdAt: 1, resolvedAt: 2
                        )
                    ],
                    nextCursor: "7"
                ),
                ReportList(reports: [])
            ),
            (
                "UpdateReportRequest", UpdateReportRequest(state: .resolved, resolution: "done"),
                UpdateReportRequest(state: .open)
            ),
            (
                "CreateWebhookRequest",
                CreateWebhookRequest(url: "https://e.com/h", events: ["messages"], description: "d"),
                CreateWebhookRequest(url: "https://e.com/h", events: ["users"])
            ),
            (
                "UpdateWebhookRequest",
                UpdateWebhookRequest(url: "https://e.com/h", events: ["reports"], description: "d", enabled: true),
                UpdateWebhookRequest()
            ),
            ("WebhookEndpoint", webhook, minimalWebhook),
            (
                "WebhookEndpointWithSecret", WebhookEndpointWithSecret(endpoint: webhook, secret: "whsec_1"),
                WebhookEndpointWithSecret(endpoint: minimalWebhook, secret: "whsec_1")
            ),
            ("WebhookEndpointList", WebhookEndpointList(webhooks: [webhook]), WebhookEndpointList(webhooks: [])),
            ("WebhookDeliveryState", WebhookDeliveryState.failed, WebhookDeliveryState.pending),
            ("WebhookDelivery", delivery, minimalDelivery),
            (
                "WebhookDeliveryList", WebhookDeliveryList(deliveries: [delivery], nextCursor: "3"),
                WebhookDeliveryList(deliveries: [])
            ),
        ]
    }()

    @Test func everySchemaHasASwiftSample() throws {
        let schemas = try #require((document["components"] as? [String: Any])?["schemas"] as? [String: Any])
        #expect(Set(schemas.keys) == Set(Self.samples.map(\.schema)))
    }

    @Test func swiftTypesEncodeExactlyWhatTheSchemasDeclare() throws {
        for sample in Self.samples {
            let complete = try WireCoding.decode(JSONValue.self, from: WireCoding.encode(sample.complete))
            let minimal = try WireCoding.decode(JSONValue.self, from: WireCoding.encode(sample.minimal))
            let schema = validator.schema(named: sample.schema)
            #expect(
                validator.validate(complete, against: schema, at: sample.schema) == [], "\(sample.schema) (complete)")
            #expect(validator.validate(minimal, against: schema, at: sample.schema) == [], "\(sample.schema) (minimal)")
            #expect(
                validator.unusedProperties(complete, of: schema, at: sample.schema) == [],
                "\(sample.schema) declares fields the type never sends")
        }
    }

    @Test func theValidatorCatchesDrift() {
        let schema = validator.schema(named: "User")
        let renamed: JSONValue = ["uid": "a", "displayName": "A", "createdAt": 1, "updatedAt": 1]
        #expect(!validator.validate(renamed, against: schema, at: "User").isEmpty)
        let wrongType: JSONValue = ["uid": "a", "name": 3, "createdAt": 1, "updatedAt": 1]
        #expect(!validator.validate(wrongType, against: schema, at: "User").isEmpty)
    }

    /// Every operation, called without credentials and with placeholder parameters, answers a status its
    /// document entry declares (never an undocumented 404 or 500).
    @Test(.timeLimit(.minutes(2))) func everyOperationAnswersOnlyDeclaredStatuses() async throws {
        let server = try await TestServer.start()
        let paths = try #require(document["paths"] as? [String: Any])
        var checked = 0
        for (path, item) in paths {
            let operations = try #require(item as? [String: Any])
            for (method, operation) in operations {
                let operation = try #require(operation as? [String: Any])
                let declared = Set(try #require(operation["responses"] as? [String: Any]).keys)
                let concrete = path.replacingOccurrences(
                    of: #"\{[^}]+\}"#, with: "placeholder", options: .regularExpression)
                var request = URLRequest(url: server.baseURL.appendingPathComponent(concrete))
                request.httpMethod = method.uppercased()
                if operation["requestBody"] != nil {
                    request.httpBody = Data("{}".utf8)
                    request.setValue("application/json", forHTTPHeaderField: "Content-Type")
                }
                let (body, response) = try await URLSession.shared.data(for: request)
                let status = try #require(response as? HTTPURLResponse).statusCode
                #expect(
                    declared.contains(String(status)), "\(method.uppercased()) \(path) answered \(status), not declared"
                )
                if status >= 400, method != "head" {
                    let error = try WireCoding.decode(ErrorResponse.self, from: Array(body))
                    #expect(error.error.code != .notFound, "\(method.uppercased()) \(path) is not routed")
                }
                checked += 1
            }
        }
        #expect(checked == 80)
        try await server.stop()
    }

    /// The statuses a caller with credentials meets are declared too: an outsider of a public group is refused with
    /// 403 `ERR_NOT_A_PARTICIPANT` where it may see the group exists, 404 elsewhere.
    @Test func anOutsidersRefusalsAreDeclared() async throws {
        let server = try await TestServer.start()
        let alice = try await server.login("alice")
        let mallory = try await server.login("mallory")
        _ = try await server.login("bob")
        let group = try await server.createConversation(token: alice, with: ["bob"], isPublic: true)
        let sent = try await server.request(
            "POST", "/v1/conversations/\(group.id)/messages", token: alice,
            body: SendMessageRequest(parts: [.text("hi")])
        )
        let message = try WireCoding.decode(Message.self, from: sent.body)
        let one = "/v1/conversations/{conversationId}/messages/{messageId}"
        let paths = try #require(document["paths"] as? [String: Any])
        let checks: [(String, String, String)] = [
            ("get", "/v1/conversations/{conversationId}", "/v1/conversations/\(group.id)"),
            ("get", "/v1/conversations/{conversationId}/messages", "/v1/conversations/\(group.id)/messages"),
            ("get", "/v1/conversations/{conversationId}/participants", "/v1/conversations/\(group.id)/participants"),
            ("get", "/v1/conversations/{conversationId}/events", "/v1/conversations/\(group.id)/events?after=0"),
            ("post", "/v1/conversations/{conversationId}/messages", "/v1/conversations/\(group.id)/messages"),
            ("get", one, "/v1/conversations/\(group.id)/messages/\(message.id)"),
            ("patch", one, "/v1/conversations/\(group.id)/messages/\(message.id)"),
            ("delete", one, "/v1/conversations/\(group.id)/messages/\(message.id)"),
            ("get", one + "/replies", "/v1/conversations/\(group.id)/messages/\(message.id)/replies"),
            ("put", one + "/reactions/{key}", "/v1/conversations/\(group.id)/messages/\(message.id)/reactions/ok"),
            ("delete", one + "/reactions/{key}", "/v1/conversations/\(group.id)/messages/\(message.id)/reactions/ok"),
            ("post", "/v1/reports", "/v1/reports"),
            ("get", "/v1/conversations/{conversationId}/bans", "/v1/conversations/\(group.id)/bans"),
            ("put", "/v1/conversations/{conversationId}/bans/{uid}", "/v1/conversations/\(group.id)/bans/bob"),
            ("delete", "/v1/conversations/{conversationId}/bans/{uid}", "/v1/conversations/\(group.id)/bans/bob"),
        ]
        for (method, template, path) in checks {
            let operation = try #require((paths[template] as? [String: Any])?[method] as? [String: Any])
            let declared = Set(try #require(operation["responses"] as? [String: Any]).keys)
            let answer =
                switch method {
                case "post" where template == "/v1/reports":
                    try await server.request(
                        "POST", path, token: mallory,
                        body: CreateReportRequest(conversationId: group.id, messageId: message.id, reason: .spam))
                case "post":
                    try await server.request(
                        "POST", path, token: mallory, body: SendMessageRequest(parts: [.text("hi")]))
                case "patch":
                    try await server.request(
                        "PATCH", path, token: mallory, body: EditMessageRequest(parts: [.text("mine")]))
                case "put" where template.hasSuffix("/bans/{uid}"):
                    try await server.request("PUT", path, token: mallory, body: BanRequest())
                default:
                    try await server.request(method.uppercased(), path, token: mallory)
                }
            #expect(
                answer.status >= 400 && declared.contains(String(answer.status)),
                "\(method) \(template): \(answer.status)"
            )
        }
        try await server.stop()
    }

    @Test func undocumentedRoutesAreNotFound() async throws {
        let server = try await TestServer.start()
        var request = URLRequest(url: server.baseURL.appendingPathComponent("v1/users/bob"))
        request.httpMethod = "PUT"
        let (body, response) = try await URLSession.shared.data(for: request)
        #expect((response as? HTTPURLResponse)?.statusCode == 404)
        #expect(try WireCoding.decode(ErrorResponse.self, from: Array(body)).error.code == .notFound)
        try await server.stop()
    }
}

/// Just enough JSON Schema (as OpenAPI 3.1 uses it here) to check our types against the document.
struct SchemaValidator {
    let document: [String: Any]

    func schema(named name: String) -> [String: Any] {
        let schemas = (document["components"] as? [String: Any])?["schemas"] as? [String: Any]
        return schemas?[name] as? [String: Any] ?? [:]
    }

    func resolve(_ schema: [String: Any]) -> [String: Any] {
        guard let ref = schema["$ref"] as? String else { return schema }
        return resolve(self.schema(named: String(ref.split(separator: "/").last ?? "")))
    }

    func validate(_ value: JSONValue, against schema: [String: Any], at path: String) -> [String] {
        let schema = resolve(schema)
        var errors: [String] = []
        if let allowed = schema["enum"] as? [Any] {
            guard case .string(let string) = value, allowed.contains(where: { ($0 as? String) == string }) else {
                return ["\(path): \(value) is not one of \(allowed)"]
            }
        }
        switch (schema["type"] as? String, value) {
        case (nil, _): return errors
        case ("string", .string), ("boolean", .bool), ("number", .number): return errors
        case ("integer", .number(let number)) where number == number.rounded(): return errors
        case ("array", .array(let items)):
            let itemSchema = schema["items"] as? [String: Any] ?? [:]
            for (index, item) in items.enumerated() {
                errors += validate(item, against: itemSchema, at: "\(path)[\(index)]")
            }
            return errors
        case ("object", .object(let members)):
            let properties = schema["properties"] as? [String: Any] ?? [:]
            for required in schema["required"] as? [String] ?? [] where members[required] == nil {
                errors.append("\(path): missing required \(required)")
            }
            for (key, member) in members {
                guard let property = properties[key] as? [String: Any] else {
                    if (schema["additionalProperties"] as? Bool) == false {
                        errors.append("\(path): undeclared \(key)")
                    }
                    continue
                }
                errors += validate(member, against: property, at: "\(path).\(key)")
            }
            return errors
        case (let type?, _):
            return ["\(path): \(value) is not of type \(type)"]
        }
    }

    /// Properties the schema declares that a complete value does not contain (recursively).
    func unusedProperties(_ value: JSONValue, of schema: [String: Any], at path: String) -> [String] {
        let schema = resolve(schema)
        switch value {
        case .object(let members) where schema["type"] as? String == "object":
            let properties = schema["properties"] as? [String: Any] ?? [:]
            return properties.keys.sorted().flatMap { key -> [String] in
                guard let member = members[key] else { return ["\(path).\(key)"] }
                return unusedProperties(member, of: properties[key] as? [String: Any] ?? [:], at: "\(path).\(key)")
            }
        case .array(let items) where schema["type"] as? String == "array":
            return items.first.map {
                unusedProperties($0, of: schema["items"] as? [String: Any] ?? [:], at: "\(path)[0]")
            } ?? []
        default:
            return []
        }
    }
}
