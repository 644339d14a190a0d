import ParleyProtocol
import ParleyStore
import Testing

@testable import ParleyServer

/// The life of a server WebSocket (docs/PROTOCOL.md, "The WebSocket"): event in, exact action out. Frames are strings
/// and what authentication finds is an int here: the machine only holds them.
@Suite struct WebSocketConnectionStateMachineTests {
    typealias Machine = WebSocketConnectionStateMachine<String, Int>

    static let connect = ConnectFrame(protocolVersion: 1)

    /// A machine that read `connect` while holding its accept slot, and authenticated.
    static func registered() -> Machine {
        var machine = Machine()
        _ = machine.dataFrameReceived("connect")
        _ = machine.connectAccepted(connect)
        _ = machine.authenticated(7)
        return machine
    }

    @Test func framesWaitUntilTheConnectionIsLiveThenGoOutInOrderWithTheWithheldRead() {
        var machine = Machine()
        #expect(machine.dataFrameReceived("connect") == .handshake("connect"))
        #expect(machine.connectAccepted(Self.connect) == .authenticate(Self.connect))
        #expect(machine.dataFrameReceived("a") == .none)
        #expect(machine.readRequested() == .none)
        #expect(machine.authenticated(7) == .register(7, Self.connect))
        #expect(machine.dataFrameReceived("b") == .none)
        #expect(machine.acceptsReplay)
        // Live: the accept slot goes back, and what waited is handed over with the read that was withheld.
        #expect(machine.caughtUp() == .goLive(releasing: .accept, held: ["a", "b"], passRead: true))
        #expect(machine.dataFrameReceived("c") == .serve("c"))
        #expect(machine.readRequested() == .passRead)
        #expect(machine.caughtUp() == .none)
    }

    @Test func aClientSlowToSendConnectGivesItsSlotUpAndAsksAgainForTheHandshake() {
        var machine = Machine()
        #expect(machine.connectGraceEnded(late: false) == .awaitConnect(releasing: .accept))
        #expect(machine.connectAccepted(Self.connect) == .requestHandshakeSlot)
        let ticket = AdmissionGate.Ticket(id: 3)
        // Granted later: nothing until then.
        #expect(machine.handshakeTicketIssued(ticket, holding: false) == .none)
        #expect(machine.handshakeSlotGranted() == .authenticate(Self.connect))
        _ = machine.authenticated(7)
        #expect(machine.caughtUp() == .goLive(releasing: .handshake(ticket), held: [], passRead: false))
        // A late timer (the loop was busy): the slot is kept.
        var late = Machine()
        #expect(late.connectGraceEnded(late: true) == .awaitConnect(releasing: .none))
        #expect(late.connectAccepted(Self.connect) == .authenticate(Self.connect))
        // A connection that sent connect in time has nothing to give up.
        var prompt = Machine()
        _ = prompt.connectAccepted(Self.connect)
        #expect(prompt.connectGraceEnded(late: false) == .none)
    }

    @Test func aSlotGrantedAfterTheSocketClosedIsGivenBack() {
        var machine = Machine()
        _ = machine.connectGraceEnded(late: false)
        _ = machine.connectAccepted(Self.connect)
        let ticket = AdmissionGate.Ticket(id: 4)
        _ = machine.handshakeTicketIssued(ticket, holding: false)
        _ = machine.closeRequested(code: 1001, reason: .serverShuttingDown)
        #expect(machine.handshakeSlotGranted() == .releaseSlot(.handshake(ticket)))
        #expect(machine.channelClosed() == .cleanUp(unregister: false, releasing: .none, closeCode: 1001))
    }

    @Test func aRefusedTokenClosesWith4001AndItsCodeAndAFailedStoreWith1011() {
        var machine = Machine()
        _ = machine.connectAccepted(Self.connect)
        let refusal = DomainError(.authTokenInvalid, "no")
        #expect(
            machine.authenticationFailed(refusal)
                == .sendClose(code: 4001, reason: .authTokenInvalid, error: refusal, awaitAnswer: true))
        #expect(machine.dataFrameReceived("late") == .none)
        // Nothing was registered: nothing to unregister; the accept slot is still to give back.
        #expect(machine.channelClosed() == .cleanUp(unregister: false, releasing: .accept, closeCode: 4001))
        var failing = Machine()
        _ = failing.connectAccepted(Self.connect)
        let internalError = DomainError(.internalError, "store")
        #expect(
            failing.authenticationFailed(internalError)
                == .sendClose(code: 1011, reason: .internalError, error: internalError, awaitAnswer: true))
    }

    @Test func anAnswerThatArrivesAfterTheSocketClosedIsDiscarded() {
        var machine = Machine()
        _ = machine.connectAccepted(Self.connect)
        _ = machine.channelClosed()
        #expect(machine.authenticated(7) == .none)
        var closing = Machine()
        _ = closing.connectAccepted(Self.connect)
        _ = closing.closeRequested(code: 1001, reason: .serverShuttingDown)
        #expect(closing.authenticationFailed(DomainError(.authTokenInvalid, "no")) == .none)
        #expect(closing.caughtUp() == .none)
    }

    @Test func onlyARegisteredConnectionIsUnregisteredAndOnlyOnce() {
        var machine = Self.registered()
        #expect(machine.channelClosed() == .cleanUp(unregister: true, releasing: .accept, closeCode: 1006))
        #expect(machine.channelClosed() == .none)
    }

    @Test func theHandshakeTimesOutOnlyWhileWaitingForConnect() {
        var waiting = Machine()
        #expect(
            waiting.handshakeTimedOut()
                == .sendClose(code: 4400, reason: .handshakeFailed, error: nil, awaitAnswer: true))
        var connected = Machine()
        _ = connected.connectAccepted(Self.connect)
        #expect(connected.handshakeTimedOut() == .none)
    }

    @Test func aPingThatIsNotAnsweredByTheNextOneClosesWith1001() {
        var machine = Machine()
        #expect(machine.pingDue() == .sendPing(1))
        machine.pongReceived(1)
        #expect(machine.pingDue() == .sendPing(2))
        // An answer to another ping, or none at all, does not count.
        machine.pongReceived(1)
        machine.pongReceived(nil)
        #expect(
            machine.pingDue() == .sendClose(code: 1001, reason: .heartbeatTimeout, error: nil, awaitAnswer: true))
    }

    @Test func aPingIsAnsweredThroughTheQueueOnceRegisteredAndAClientThatDoesNotReadBeforeIsClosed() {
        var opening = Machine()
        #expect(opening.pingReceived("p", writable: true) == .answerPing("p", throughQueue: false))
        #expect(
            opening.pingReceived("p", writable: false)
                == .sendClose(code: 4008, reason: .slowConsumer, error: nil, awaitAnswer: false))
        var live = Self.registered()
        #expect(live.pingReceived("p", writable: false) == .answerPing("p", throughQueue: true))
        _ = live.channelClosed()
        #expect(live.pingReceived("p", writable: true) == .none)
    }

    @Test func theFirstCloseWinsAndTheClientsAnswerEndsIt() {
        var machine = Machine()
        #expect(
            machine.closeRequested(code: 4008, reason: .slowConsumer)
                == .sendClose(code: 4008, reason: .slowConsumer, error: nil, awaitAnswer: true))
        #expect(machine.closeRequested(code: 1001, reason: .serverShuttingDown) == .none)
        #expect(machine.pingDue() == .none)
        #expect(machine.closeTimedOut() == .closeChannel)
        // Whatever the client's close says, it answers ours.
        #expect(machine.closeFrameReceived(.invalidCode) == .closeChannel)
        #expect(machine.channelClosed() == .cleanUp(unregister: false, releasing: .accept, closeCode: 4008))
    }

    @Test func aClientsCloseIsAnsweredOnceWithItsCodeOrRefused() {
        var machine = Self.registered()
        #expect(machine.closeFrameReceived(.code(4000)) == .answerClose(code: 4000))
        #expect(machine.closeFrameReceived(.code(1000)) == .closeChannel)
        #expect(machine.channelClosed() == .cleanUp(unregister: true, releasing: .accept, closeCode: 4000))
        #expect(machine.closeFrameReceived(.empty) == .none)
        #expect(machine.closeTimedOut() == .none)
        var empty = Machine()
        #expect(empty.closeFrameReceived(.empty) == .answerClose(code: 1000))
        #expect(empty.channelClosed() == .cleanUp(unregister: false, releasing: .accept, closeCode: 1005))
        var invalid = Machine()
        #expect(
            invalid.closeFrameReceived(.invalidReason)
                == .sendClose(code: 1007, reason: .invalidUTF8, error: nil, awaitAnswer: false))
        var reserved = Machine()
        #expect(
            reserved.closeFrameReceived(.invalidCode)
                == .sendClose(code: 1002, reason: .webSocketProtocolError, error: nil, awaitAnswer: false))
    }

    @Test func framesThatWaitedAreDroppedWhenTheConnectionClosesFirst() {
        var machine = Machine()
        _ = machine.connectAccepted(Self.connect)
        _ = machine.dataFrameReceived("a")
        _ = machine.authenticated(7)
        _ = machine.closeRequested(code: 1001, reason: .serverShuttingDown)
        #expect(machine.caughtUp() == .none)
        #expect(machine.dataFrameReceived("b") == .none)
    }
}
