import HTTPTypes
import Hummingbird
import Logging
import OTel
import ParleyProtocol
import ParleyStore
import ServiceLifecycle
import Tracing

/// Where traces go: spans of REST requests and of WebSocket commands, exported over OTLP/HTTP
/// (docs/DEPLOYMENT.md, "Traces"). Off unless an endpoint is set.
public struct TraceExport: Sendable {
    /// How spans are encoded on the wire.
    public enum Encoding: String, Sendable, CaseIterable {
        case protobuf = "http/protobuf"
        case json = "http/json"
    }

    /// The collector's URL for traces, e.g. `http://127.0.0.1:4318/v1/traces` (used as given).
    public var endpoint: String
    public var encoding: Encoding = .protobuf
    /// The share of traces started here that are kept (0...1); a request that carries a `traceparent` follows its
    /// caller's choice.
    public var sampleRatio: Double = 1
    /// `service.name` of the spans.
    public var serviceName = "parley-server"

    public init(endpoint: String) { self.endpoint = endpoint }
}

/// The server's tracer, passed to the parts that make spans; ``off`` makes none and costs a nil check.
///
/// swift-otel exports the spans (a batch processor and the OTLP/HTTP exporter, run as a service of the server, so that
/// a graceful stop sends what is left). Only its tracing backend is used: logs stay this server's (JSON or text lines,
/// with the request's `trace_id` and `span_id`) and metrics stay Prometheus. The tracer belongs to the server, not to
/// the process (`InstrumentationSystem` is not bootstrapped), as its metrics do: several servers in one process
/// (tests) keep their spans apart.
struct ServerTracing: Sendable {
    let tracer: (any Tracer)?

    static let off = ServerTracing(tracer: nil)

    /// The trace and span ids of a span, as the log fields `trace_id`, `span_id` and `trace_flags` (swift-otel's
    /// metadata provider reads them from the span's context).
    private static let ids = OTel.makeLoggingMetadataProvider()

    /// A tracer exporting to `export`, and the service that sends its spans; `.off` and nil without one.
    static func make(_ export: TraceExport?, logger: Logger) throws -> (ServerTracing, (any Service)?) {
        guard let export else { return (.off, nil) }
        var configuration = OTel.Configuration.default
        configuration.serviceName = export.serviceName
        configuration.resourceAttributes["service.version"] = ServerBuild.version
        configuration.diagnosticLogger = .custom(logger)
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.traces.enabled = true
        configuration.traces.exporter = .otlp
        configuration.traces.otlpExporter.endpoint = export.endpoint
        configuration.traces.otlpExporter.protocol = export.encoding == .json ? .httpJSON : .httpProtobuf
        guard
            let sampler = OTel.Configuration.TracesConfiguration.SamplerConfiguration.parentBasedTraceIDRatio(
                ratio: export.sampleRatio)
        else {
            throw TraceExportError(message: "The trace sample ratio must be between 0 and 1.")
        }
        configuration.traces.sampler = sampler
        let (tracer, service) = try OTel.makeTracingBackend(configuration: configuration)
        return (ServerTracing(tracer: tracer), service)
    }

    /// `trace_id`, `span_id` and `trace_flags` of `span`, for the log lines made under it.
    static func logMetadata(of span: any Span) -> Logger.Metadata {
        ServiceContext.$current.withValue(span.context) { ids.get() }
    }

    /// A span for a command a WebSocket client sent (``FrameSession``); nil when tracing is off.
    func startCommand(_ command: Command, connection: ServerConnection) -> (any Span)? {
        guard let tracer else { return nil }
        let (name, conversationId) = Self.describe(command)
        let span = tracer.startSpan("parley.\(name)", context: .topLevel, ofKind: .server)
        span.updateAttributes { attributes in
            attributes["parley.command"] = name
            attributes["parley.app_id"] = connection.principal.appId
            attributes["parley.conversation_id"] = conversationId
            attributes["parley.connection"] = connection.id
        }
        return span
    }

    /// Ends a command's span with its outcome.
    static func end(_ span: (any Span)?, _ result: Result<CommandResult, any Error>) {
        guard let span else { return }
        switch result {
        case .success(let outcome):
            switch outcome.outcome {
            case .message(let message, let duplicate):
                span.updateAttributes { attributes in
                    attributes["parley.message_id"] = message.id
                    attributes["parley.seq"] = Int(message.seq)
                    attributes["parley.duplicate"] = duplicate
                }
            case .reactions(_, let duplicate):
                span.attributes["parley.duplicate"] = duplicate
            default:
                break
            }
        case .failure(let error):
            let code = (error as? DomainError)?.code ?? .internalError
            span.attributes["parley.error"] = code.rawValue
            // A refusal is the client's; what the server could not do (a code REST answers with 5xx: its storage
            // full or unavailable, shutting down, an internal error) marks the span as failed, as a request's 5xx does.
            if code.httpStatus.code >= 500 {
                span.recordError(error)
                span.setStatus(SpanStatus(code: .error))
            }
        }
        span.end()
    }

    private static func describe(_ command: Command) -> (name: String, conversationId: String?) {
        switch command {
        case .sendMessage(let send): ("send", send.conversationId)
        case .editMessage(let edit): ("edit", edit.conversationId)
        case .deleteMessage(let delete): ("delete", delete.conversationId)
        case .react(let react): ("react", react.conversationId)
        case .markReceipt(let receipt): ("receipt", receipt.conversationId)
        default: ("command", nil)
        }
    }
}

struct TraceExportError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// A span for each HTTP request (kind server), named by its route once routed (`GET /v1/conversations/{id}`), child of
/// the caller's span when the request carries a W3C `traceparent`; the request's log lines (``ObservabilityMiddleware``
/// inside it) carry its `trace_id` and `span_id`.
///
/// Like Hummingbird's `TracingMiddleware`, but with the server's own tracer (``ServerTracing``) and recording no query
/// string and no header: a query can hold a download link's signature, headers the credentials.
struct RequestTracingMiddleware<Context: RequestContext>: RouterMiddleware {
    let tracer: any Tracer

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        var caller = ServiceContext.topLevel
        tracer.extract(request.headers, into: &caller, using: HeaderExtractor())
        let method = request.method.rawValue
        let span = tracer.startSpan(method, context: caller, ofKind: .server)
        span.updateAttributes { attributes in
            attributes["http.request.method"] = method
            attributes["url.path"] = request.uri.path
        }
        var context = context
        for (key, value) in ServerTracing.logMetadata(of: span) { context.logger[metadataKey: key] = value }
        do {
            var response = try await next(request, context)
            let route = context.endpointPath
            span.operationName = "\(method) \(route ?? "unmatched")"
            span.updateAttributes { attributes in
                attributes["http.route"] = route
                attributes["http.response.status_code"] = Int(response.status.code)
            }
            if response.status.code >= 500 { span.setStatus(SpanStatus(code: .error)) }
            // A streamed body (a download) is part of the request: the span ends when it is written.
            let body = response.body
            response.body = ResponseBody(contentLength: body.contentLength) { writer in
                defer { span.end() }
                try await body.write(writer)
            }
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            span.operationName = "\(method) \(context.endpointPath ?? "unmatched")"
            span.attributes["http.response.status_code"] = Int(status)
            if status >= 500 {
                span.recordError(error)
                span.setStatus(SpanStatus(code: .error))
            }
            span.end()
            throw error
        }
    }

    /// `traceparent` and `tracestate` (and whatever else the propagators read) from the request's headers.
    struct HeaderExtractor: Extractor {
        func extract(key: String, from headers: HTTPFields) -> String? {
            HTTPField.Name(key).flatMap { headers[$0] }
        }
    }
}
