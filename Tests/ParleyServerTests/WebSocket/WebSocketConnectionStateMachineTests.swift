import ParleyProtocol
import Testing

@testable import ParleyServer

/// The life of a server WebSocket (docs/PROTOCOL.md, "The WebSocket"): event in, exact action out.
@Suite struct WebSocketConnectionStateMachineTests {
    typealias Machine = WebSocketConnectionStateMachine

    @Test func theFirstFrameIsTheHandshakeAndFramesWaitUntilTheConnectionIsLive() {
        var machine = Machine()
        #expect(machine.dataFrameReceived() == .handshake)
        machine.connectAccepted()
        #expect(machine.state == .authenticating)
        #expect(machine.dataFrameReceived() == .hold)
        #expect(machine.authenticated() == .register)
        #expect(machine.dataFrameReceived() == .hold)
        let live = machine.caughtUp()
        #expect(live && machine.state == .live)
        #expect(machine.dataFrameReceived() == .serve)
    }

    @Test func aRefusedTokenClosesWith4001AndItsCode() {
        var machine = Machine()
        machine.connectAccepted()
        #expect(machine.authenticationFailed(.authTokenInvalid) == .refuse(.authTokenInvalid))
        #expect(
            machine.closeRequested(
                code: WebSocketCloseCode.authenticationFailed, reason: .authTokenInvalid, errorFrame: true)
                == .sendClose(code: 4001, reason: .authTokenInvalid, errorFrame: true)
        )
        #expect(machine.dataFrameReceived() == .drop)
        // Nothing was registered: nothing to unregister.
        #expect(machine.channelClosed() == .none)
    }

    @Test func anAnswerThatArrivesAfterTheSocketClosedIsDiscarded() {
        var machine = Machine()
        machine.connectAccepted()
        #expect(machine.channelClosed() == .none)
        #expect(machine.authenticated() == .discard)
        var closing = Machine()
        closing.connectAccepted()
        _ = closing.closeRequested(code: 1001, reason: .serverShuttingDown, errorFrame: false)
        #expect(closing.authenticationFailed(.authTokenInvalid) == .discard)
        let live = closing.caughtUp()
        #expect(!live)
    }

    @Test func onlyARegisteredConnectionIsUnregisteredAndOnlyOnce() {
        var machine = Machine()
        machine.connectAccepted()
        _ = machine.authenticated()
        #expect(machine.channelClosed() == .unregister)
        #expect(machine.channelClosed() == .none)
    }

    @Test func theHandshakeTimesOutOnlyWhileWaitingForConnect() {
        var waiting = Machine()
        #expect(waiting.handshakeTimedOut() == .sendClose(code: 4400, reason: .handshakeFailed, errorFrame: false))
        var connected = Machine()
        connected.connectAccepted()
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
        #expect(machine.pingDue() == .close(code: 1001, reason: .heartbeatTimeout))
    }

    @Test func theFirstCloseWinsAndTheClientsAnswerEndsIt() {
        var machine = Machine()
        #expect(
            machine.closeRequested(code: 4008, reason: .slowConsumer, errorFrame: false)
                == .sendClose(code: 4008, reason: .slowConsumer, errorFrame: false))
        #expect(machine.closeRequested(code: 1001, reason: .serverShuttingDown, errorFrame: false) == .none)
        #expect(machine.pingDue() == .none)
        #expect(machine.closeTimedOut())
        #expect(machine.closeFrameReceived() == .closeChannel)
    }

    @Test func aClientsCloseIsAnsweredOnce() {
        var machine = Machine()
        #expect(machine.closeFrameReceived() == .answerAndClose)
        #expect(machine.closeFrameReceived() == .closeChannel)
        _ = machine.channelClosed()
        #expect(machine.closeFrameReceived() == .none)
        #expect(!machine.closeTimedOut())
    }
}
