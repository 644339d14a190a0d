import InMemoryTracing
import ParleyProtocol
import ParleyStore
import Testing
import Tracing

@testable import ParleyServer

/// How a WebSocket command's span ends (``ServerTracing/end(_:_:)``): what it stored, or the refusal's code, and a
/// failed status only for what the server could not do (what REST answers with a 5xx), as a request's span has.
@Suite struct CommandSpanTests {
    static func ended(_ result: Result<CommandResult, any Error>) throws -> FinishedInMemorySpan {
        let tracer = InMemoryTracer()
        ServerTracing.end(tracer.startSpan("parley.send", context: .topLevel, ofKind: .server), result)
        return try #require(tracer.finishedSpans.first)
    }

    @Test(arguments: [
        (ErrorCode.conversationNotFound, false), (.notAParticipant, false), (.rateLimited, false),
        (.messageTooLarge, false), (.storageFull, true), (.databaseUnavailable, true), (.serverShuttingDown, true),
        (.internalError, true),
    ])
    func aRefusalIsTheClientsAndAFailureTheServers(code: ErrorCode, failed: Bool) throws {
        let span = try Self.ended(.failure(DomainError(code, "no")))
        #expect(span.attributes["parley.error"]?.toSpanAttribute() == .string(code.rawValue))
        #expect((span.status?.code == .error) == failed)
    }

    @Test func anErrorThatIsNoRefusalIsAnInternalFailure() throws {
        struct Broken: Error {}
        let span = try Self.ended(.failure(Broken()))
        #expect(span.attributes["parley.error"]?.toSpanAttribute() == .string(ErrorCode.internalError.rawValue))
        #expect(span.status?.code == .error)
    }
}
