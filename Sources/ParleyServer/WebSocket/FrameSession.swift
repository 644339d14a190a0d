import Foundation
import NIOWebSocket
import ParleyProtocol
import ParleyStore

/// The client frames of one connection: decodes them and answers on the connection's queue.
struct FrameSession {
    let connection: ServerConnection
    let writer: CommandWriter
    let typing: TypingTracker
    let time: ServerClock
    let limits: MessageLimits
    let malformedFrameLimit: Int
    let sends: SendRateLimiter?
    let metrics: ServerMetrics
    let tracing: ServerTracing
    private var malformedFrames = 0
    private var typingBudget: TokenBucket

    init(connection: ServerConnection, gateway: WebSocketGateway) {
        self.connection = connection
        self.writer = gateway.writer
        self.typing = gateway.typing
        self.time = gateway.time
        self.limits = gateway.configuration.messageLimits
        self.malformedFrameLimit = gateway.configuration.malformedFrameLimit
        self.sends = gateway.sends
        self.metrics = gateway.metrics
        self.tracing = gateway.tracing
        self.typingBudget = TokenBucket(
            perSecond: gateway.configuration.typingFramesPerSecond, now: gateway.time.timeline.now()
        )
    }

    /// Answers one data frame (text or binary) of the client.
    mutating func receive(_ message: WebSocketFrame) {
        let frame: ClientFrame
        do {
            guard message.opcode == .text else {
                throw DomainError(.malformedFrame, "Frames are JSON text; binary frames are not accepted.")
            }
            frame = try ClientFrame.decode(bytes: message.unmaskedData.readableBytesView)
        } catch let unknown as UnknownFrameType {
            reply(error: DomainError(.unknownFrameType, "Unknown frame type \"\(unknown.type)\"."))
            return
        } catch {
            malformedFrames += 1
            metrics.malformedFrames.increment()
            reply(error: DomainError(.malformedFrame, "The frame is not a valid protocol v1 frame."))
            if malformedFrames >= malformedFrameLimit {
                // The answers to the malformed frames go out before the close.
                connection.requestClose(
                    code: WebSocketCloseCode.protocolViolation, reason: .malformedFrame, afterQueued: true
                )
            }
            return
        }
        do {
            try Self.validate(frame)
        } catch let refusal as DomainError {
            // The ref is echoed unless it is what was refused.
            let ref = frame.ref.flatMap { InputRules.hasControlCharacter($0) ? nil : $0 }
            reply(.error(Self.errorFrame(refusal, ref: ref)))
            return
        } catch {
            return
        }
        switch frame {
        case .connect:
            reply(error: DomainError(.badRequest, "The connection is already established."))
        case .ping(let ping):
            reply(.pong(PongFrame(id: ping.id, serverTime: time.epochMilliseconds())))
        case .send(let send):
            self.send(send)
        case .typing(let frame):
            guard typingBudget.take(now: time.timeline.now()) else {
                reply(error: DomainError(.rateLimited, "At most \(typingBudget.capacity) typing frames per second."))
                return
            }
            typing.typing(conversationId: frame.conversationId, isTyping: frame.isTyping, on: connection)
        case .receipt(let frame):
            receipt(frame)
        case .edit(let frame):
            edit(frame)
        case .delete(let frame):
            delete(frame)
        case .reaction(let frame):
            reaction(frame)
        }
    }

    /// The identifiers and positions of a frame (``InputRules``); a send's content is checked with its limits.
    static func validate(_ frame: ClientFrame) throws {
        switch frame {
        case .connect:
            break
        case .ping(let ping):
            try InputRules.identifier(ping.id, "id")
        case .send(let send):
            try InputRules.identifier(send.ref, "ref")
            try InputRules.identifier(send.conversationId, "conversationId")
            try InputRules.identifier(send.clientMessageId, "clientMessageId")
        case .typing(let typing):
            try InputRules.identifier(typing.conversationId, "conversationId")
        case .receipt(let receipt):
            try InputRules.identifier(receipt.ref, "ref")
            try InputRules.identifier(receipt.conversationId, "conversationId")
            try InputRules.position(receipt.deliveredSeq, "deliveredSeq")
            try InputRules.position(receipt.readSeq, "readSeq")
        case .edit(let edit):
            try InputRules.identifier(edit.ref, "ref")
            try InputRules.identifier(edit.conversationId, "conversationId")
            try InputRules.identifier(edit.messageId, "messageId")
        case .delete(let delete):
            try InputRules.identifier(delete.ref, "ref")
            try InputRules.identifier(delete.conversationId, "conversationId")
            try InputRules.identifier(delete.messageId, "messageId")
        case .reaction(let reaction):
            try InputRules.identifier(reaction.ref, "ref")
            try InputRules.identifier(reaction.conversationId, "conversationId")
            try MessageRules.validateReaction(messageId: reaction.messageId, key: reaction.key)
        }
    }

    private func receipt(_ frame: ReceiptFrame) {
        let principal = connection.principal
        let command = Command.MarkReceipt(
            appId: principal.appId, conversationId: frame.conversationId, uid: principal.uid,
            deliveredSeq: frame.deliveredSeq, readSeq: frame.readSeq, now: time.epochMilliseconds()
        )
        let connection = self.connection
        enqueue(.markReceipt(command)) { result in
            if case .failure(let error) = result {
                Self.reply(.error(Self.errorFrame(error, ref: frame.ref)), on: connection)
            }
        }
    }

    /// Takes one from the user's message budget and runs `check`; false (and the error answered) when either
    /// refuses.
    private func admitted(ref: String, _ check: () throws -> Void = {}) -> Bool {
        do {
            try sends?.take(appId: connection.principal.appId, uid: connection.principal.uid)
            try check()
            return true
        } catch {
            reply(.error(Self.errorFrame(error, ref: ref)))
            return false
        }
    }

    private func send(_ frame: SendFrame) {
        guard
            admitted(
                ref: frame.ref,
                {
                    try MessageRules.validate(
                        parts: frame.parts, metadata: frame.metadata, alert: frame.alert,
                        clientMessageId: frame.clientMessageId, replyTo: frame.replyTo, mentions: frame.mentions,
                        limits: limits
                    )
                })
        else { return }
        let principal = connection.principal
        let now = time.epochMilliseconds()
        var command = Command.SendMessage(
            appId: principal.appId, conversationId: frame.conversationId, sender: principal.uid,
            messageId: Secrets.messageID(at: now), clientMessageId: frame.clientMessageId, parts: frame.parts,
            metadata: frame.metadata, alert: frame.alert, replyTo: frame.replyTo, mentions: frame.mentions,
            now: now
        )
        command.silent = frame.silent ?? false
        submit(.sendMessage(command), ref: frame.ref)
    }

    private func edit(_ frame: EditFrame) {
        guard
            admitted(
                ref: frame.ref,
                {
                    try MessageRules.validateEdit(
                        messageId: frame.messageId, parts: frame.parts, metadata: frame.metadata,
                        mentions: frame.mentions,
                        limits: limits
                    )
                })
        else { return }
        let principal = connection.principal
        let command = Command.EditMessage(
            appId: principal.appId, conversationId: frame.conversationId, actor: principal.uid,
            messageId: frame.messageId, parts: frame.parts, metadata: frame.metadata, mentions: frame.mentions,
            limits: limits, now: time.epochMilliseconds()
        )
        submit(.editMessage(command), ref: frame.ref)
    }

    private func delete(_ frame: DeleteFrame) {
        guard admitted(ref: frame.ref) else { return }
        let principal = connection.principal
        let command = Command.MessageAction(
            appId: principal.appId, conversationId: frame.conversationId, actor: principal.uid,
            messageId: frame.messageId, now: time.epochMilliseconds()
        )
        submit(.deleteMessage(command), ref: frame.ref)
    }

    private func reaction(_ frame: ReactionFrame) {
        guard admitted(ref: frame.ref) else { return }
        let principal = connection.principal
        let command = Command.React(
            appId: principal.appId, conversationId: frame.conversationId, actor: principal.uid,
            messageId: frame.messageId, key: frame.key, add: !(frame.remove ?? false), now: time.epochMilliseconds()
        )
        submit(.react(command), ref: frame.ref)
    }

    /// Stores a command that changes a message and answers with an ack carrying its outcome, or an error.
    private func submit(_ command: Command, ref: String) {
        let connection = self.connection
        enqueue(command) { result in
            switch result {
            case .success(let outcome):
                switch outcome.outcome {
                case .message(let message, let duplicate):
                    Self.reply(.ack(AckFrame(ref: ref, message: message, duplicate: duplicate)), on: connection)
                case .reactions(let reactions, let duplicate):
                    Self.reply(.ack(AckFrame(ref: ref, duplicate: duplicate, reactions: reactions)), on: connection)
                default:
                    return
                }
            case .failure(let error):
                Self.reply(.error(Self.errorFrame(error, ref: ref)), on: connection)
            }
        }
    }

    /// Hands a command to the writer, in a span of its own when tracing is on (ended once it is answered).
    private func enqueue(_ command: Command, completion: @escaping CommandWriter.Completion) {
        guard let span = tracing.startCommand(command, connection: connection) else {
            writer.enqueue(command, completion: completion)
            return
        }
        writer.enqueue(command) { result in
            completion(result)
            ServerTracing.end(span, result)
        }
    }

    private func reply(_ frame: ServerFrame) { Self.reply(frame, on: connection) }

    private func reply(error: DomainError, ref: String? = nil) {
        reply(.error(ErrorFrame(ref: ref, code: error.code, message: error.message)))
    }

    private static func reply(_ frame: ServerFrame, on connection: ServerConnection) {
        connection.push(FrameEncoding.frame(frame))
    }

    static func errorFrame(_ error: any Error, ref: String?) -> ErrorFrame {
        if let refusal = error as? DomainError {
            return ErrorFrame(
                ref: ref, code: refusal.code, message: refusal.message,
                retryAfterMs: refusal.retryAfter?.roundedUpMilliseconds
            )
        }
        return ErrorFrame(ref: ref, code: .internalError, message: "The server could not complete the request.")
    }
}

extension ClientFrame {
    /// The `ref` a frame carries, to be echoed in its answer.
    var ref: String? {
        switch self {
        case .send(let send): send.ref
        case .receipt(let receipt): receipt.ref
        case .edit(let edit): edit.ref
        case .delete(let delete): delete.ref
        case .reaction(let reaction): reaction.ref
        case .connect, .ping, .typing: nil
        }
    }
}
