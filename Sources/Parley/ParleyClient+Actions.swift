import Foundation
import ParleyAPI
import ParleyAPIClient

/// Profile, conversation management, receipts, typing, unread counts and presence.
extension ParleyClient {
    // MARK: Profile

    /// Updates the logged-in user's profile; everyone who shares a conversation with you gets `profile.update`.
    @discardableResult
    public func updateProfile(name: String? = nil, avatarURL: String? = nil, metadata: JSONValue? = nil) async throws
        -> User
    {
        let session = try requireSession()
        let body = UpdateUserRequest(name: name, avatarURL: avatarURL, metadata: metadata)
        let user = try await rest.call {
            try await $0.updateUser(path: .init(uid: session.user.uid), body: .json(body)).ok.body.json
        }
        let saved = state.withLockedValue { state -> StoredSession? in
            state.session?.user = user
            return state.session
        }
        if let saved { try sessionStore.save(saved) }
        return user
    }

    // MARK: Conversations

    /// Changes a group's details (owner or admin) or what each role may do (`roles`, the owner):
    /// `conversation.update` for its participants.
    @discardableResult
    public func updateConversation(
        _ conversationId: String, name: String? = nil, description: String? = nil, isPublic: Bool? = nil,
        metadata: JSONValue? = nil, roles: ConversationRolesChange? = nil
    ) async throws -> Conversation {
        _ = try requireSession()
        let body = UpdateConversationRequest(
            name: name, description: description, isPublic: isPublic, metadata: metadata, roles: roles
        )
        return try await rest.call {
            try await $0.updateConversation(path: .init(conversationId: conversationId), body: .json(body)).ok.body.json
        }
    }

    /// Deletes a group (its owner): it disappears and refuses messages, but keeps its history for
    /// ``undeleteConversation(_:)``.
    public func deleteConversation(_ conversationId: String) async throws {
        _ = try requireSession()
        _ = try await rest.call {
            try await $0.deleteConversation(path: .init(conversationId: conversationId)).noContent
        }
    }

    /// Restores a deleted group (its owner).
    @discardableResult
    public func undeleteConversation(_ conversationId: String) async throws -> Conversation {
        _ = try requireSession()
        return try await rest.call {
            try await $0.undeleteConversation(path: .init(conversationId: conversationId)).ok.body.json
        }
    }

    /// Joins a public group.
    @discardableResult
    public func joinConversation(_ conversationId: String) async throws -> Participant {
        _ = try requireSession()
        return try await rest.call {
            try await $0.joinConversation(path: .init(conversationId: conversationId)).ok.body.json
        }
    }

    /// Leaves a group (the owner cannot leave; they delete it).
    public func leaveConversation(_ conversationId: String) async throws {
        let session = try requireSession()
        try await removeParticipant(session.user.uid, from: conversationId)
    }

    /// Removes a participant (owner: anyone but the owner; admin: members).
    public func removeParticipant(_ uid: String, from conversationId: String) async throws {
        _ = try requireSession()
        _ = try await rest.call {
            try await $0.removeParticipant(path: .init(conversationId: conversationId, uid: uid)).noContent
        }
    }

    /// Makes a participant an admin or a member (the owner).
    @discardableResult
    public func setRole(_ role: ParticipantRole, of uid: String, in conversationId: String) async throws -> Participant
    {
        _ = try requireSession()
        return try await rest.call {
            try await $0.updateParticipant(
                path: .init(conversationId: conversationId, uid: uid), body: .json(UpdateParticipantRequest(role: role))
            ).ok.body.json
        }
    }

    // MARK: Receipts

    /// Marks the messages of a conversation delivered up to `seq`: `conversationMessage.delivered` for the others.
    public func markDelivered(upTo seq: Int64, in conversationId: String) async throws {
        try await mark(ReceiptFrame(conversationId: conversationId, deliveredSeq: seq))
    }

    /// Marks the messages of a conversation read up to `seq` (and delivered): `conversationMessage.read` for the
    /// others, and your unread count drops on every device.
    public func markRead(upTo seq: Int64, in conversationId: String) async throws {
        try await mark(ReceiptFrame(conversationId: conversationId, readSeq: seq))
    }

    private func mark(_ frame: ReceiptFrame) async throws {
        _ = try requireSession()
        if await driver.send(.receipt(frame)) { return }
        let body = ReceiptRequest(deliveredSeq: frame.deliveredSeq, readSeq: frame.readSeq)
        _ = try await rest.call {
            try await $0.markReceipts(path: .init(conversationId: frame.conversationId), body: .json(body)).ok.body.json
        }
    }

    // MARK: Typing

    /// Call while the user types (on each keystroke, say): the others get `conversation.participantTyping`. The
    /// SDK sends at most one frame every 3 s; the server turns the indicator off after 5 s without one. Typing is
    /// ephemeral: nothing is sent while the socket is down. Returns whether a frame went out.
    @discardableResult
    public func startTyping(in conversationId: String) async -> Bool {
        let now = clock.now()
        let due = state.withLockedValue { state -> Bool in
            if let last = state.typingSentAt[conversationId], now - last < .seconds(3) { return false }
            state.typingSentAt[conversationId] = now
            return true
        }
        guard due else { return false }
        return await driver.send(.typing(TypingFrame(conversationId: conversationId, isTyping: true)))
    }

    /// The user stopped typing (cleared the field, left the chat): `conversation.participantTypingOff`. Sending a
    /// message stops it too.
    @discardableResult
    public func stopTyping(in conversationId: String) async -> Bool {
        state.withLockedValue { _ = $0.typingSentAt.removeValue(forKey: conversationId) }
        return await driver.send(.typing(TypingFrame(conversationId: conversationId, isTyping: false)))
    }

    // MARK: Unread and presence

    /// Unread messages per conversation and in total.
    public func unreadCounts() async throws -> UnreadSummary {
        _ = try requireSession()
        return try await rest.call { try await $0.getUnread().ok.body.json }
    }

    /// Whether a user is online, and when they were last seen.
    public func presence(of uid: String) async throws -> Presence {
        _ = try requireSession()
        return try await rest.call { try await $0.getPresence(path: .init(uid: uid)).ok.body.json }
    }
}
