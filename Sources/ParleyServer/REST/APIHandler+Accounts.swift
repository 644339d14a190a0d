import ParleyAPI
import ParleyAPIServer
import ParleyProtocol
import ParleyStore

extension APIHandler {
    /// `DELETE /v1/users/{uid}` (docs/PROTOCOL.md, "Deleting a user"): deactivated, taken out of every conversation,
    /// each message they sent deleted (erased, as the app says), then purged. Every step can be done again: a request
    /// that stopped part way is finished by the next.
    func deleteUser(_ input: Operations.DeleteUser.Input) async throws -> Operations.DeleteUser.Output {
        let appId = try await authenticator.server(apiKey: credentials.apiKey)
        try InputRules.uid(input.path.uid)
        guard let app = try await store.app(id: appId) else { throw Self.invalidApp(appId) }
        let uid = input.path.uid
        _ = try await deactivate(appId: appId, uid: uid)
        let mode = app.deletedUserMessages
        var left = try await leaveEveryConversation(appId: appId, uid: uid)
        let deleted = try await deleteEveryMessage(appId: appId, uid: uid, erasing: mode == .erase)
        // Someone may have added them to a conversation meanwhile: out again, then purge.
        for _ in 0..<3 {
            switch try await store.purgeUser(appId: appId, uid: uid, now: time.epochMilliseconds()) {
            case .purged(let user):
                webhooksQueued()
                logger.notice(
                    "User deleted",
                    metadata: ["app": "\(appId)", "uid": "\(uid)", "messages": "\(deleted)", "mode": "\(mode)"])
                return .ok(
                    .init(
                        body: .json(
                            UserDeletion(user: user, messages: mode, conversationsLeft: left, messagesDeleted: deleted)
                        )
                    )
                )
            case .notFound:
                throw DomainError.uidNotFound(uid)
            case .stillParticipates:
                left += try await leaveEveryConversation(appId: appId, uid: uid)
            }
        }
        throw DomainError(.forbidden, "\(uid) keeps being added to conversations while being deleted; try again.")
    }

    /// Takes the user out of each conversation they are in; returns how many.
    private func leaveEveryConversation(appId: String, uid: String) async throws -> Int {
        var left = 0
        for membership in try await store.memberships(appId: appId, uid: uid) {
            let command = Command.RemoveDeletedUser(
                appId: appId, conversationId: membership.conversation.id, uid: uid, now: time.epochMilliseconds()
            )
            do {
                _ = try await writer.submit(.removeDeletedUser(command))
                left += 1
            } catch let refusal as DomainError where refusal.code == .uidNotFound {
                // They left meanwhile.
            }
        }
        return left
    }

    /// Deletes (or erases) each message the user sent, page by page as an export walks them, a page's deletions
    /// submitted together; returns how many changed.
    private func deleteEveryMessage(appId: String, uid: String, erasing: Bool) async throws -> Int {
        var deleted = 0
        var after: UserExport.Position?
        repeat {
            let page = try await store.exportMessages(
                appId: appId, uid: uid, after: after, limit: 200, scan: UserExport.scanPerPage
            )
            let due = page.messages.filter { !$0.isDeleted || erasing }
            deleted += try await withThrowingTaskGroup(of: Bool.self) { group in
                for message in due {
                    let command = Command.MessageAction(
                        appId: appId, conversationId: message.conversationId, actor: nil, messageId: message.id,
                        now: time.epochMilliseconds(), erasesSender: erasing, ofDeletedUser: true
                    )
                    let writer = self.writer
                    group.addTask { try await !writer.submit(.deleteMessage(command)).events.isEmpty }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            after = page.next
        } while after != nil
        return deleted
    }
}
