// swift-tools-version: 6.1
import PackageDescription

/// The products of every target outside the SDK (the server, its stores, the CLI, the load tool, the test helpers) are
/// taken under the `Server` trait, on by default. An app that depends on the SDK alone turns it off
/// (`.package(url: ..., from: ..., traits: [])`): SwiftPM then fetches only the packages the `Parley` library needs
/// (Examples/LightApp, scripts/check-light-install; docs/SDK.md, "Installing").
let server = TargetDependencyCondition.when(traits: ["Server"])

/// `scripts/fuzz` builds with `PARLEY_FUZZ=1` (docs/RELIABILITY.md): the modules whose parsers the fuzz targets feed
/// get libFuzzer's coverage and AddressSanitizer, and `parley-fuzz` becomes libFuzzer. The packages they depend on are
/// built as usual, so a fuzzing build after the test build recompiles Parley's modules only (about 2 minutes, against
/// 6 for a build of everything with the sanitizers).
let fuzzing = Context.environment["PARLEY_FUZZ"] == "1"
let fuzzed: [SwiftSetting] = fuzzing ? [.unsafeFlags(["-sanitize=fuzzer,address"])] : []

/// The commit `parley_build_info{commit}` names: git's, as SwiftPM saw it when it read this manifest (a build from a
/// fresh clone names its HEAD; an incremental build names the commit of the manifest's last reading), `-dirty` with
/// uncommitted changes, `unknown` outside a git checkout.
let commit = Context.gitInformation.map { $0.currentCommit + ($0.hasUncommittedChanges ? "-dirty" : "") } ?? "unknown"

let package = Package(
    name: "parley",
    platforms: [.macOS(.v14), .iOS(.v17)],
    products: [
        .library(name: "Parley", targets: ["Parley"]),
        .executable(name: "parley-server", targets: ["ParleyServerApp"]),
        .executable(name: "parley", targets: ["ParleyCLI"]),
        // The load tool (docs/BENCHMARKS.md). Not a dependency of any library product.
        .executable(name: "parley-bench", targets: ["ParleyBench"]),
        // The fuzz targets' driver (docs/RELIABILITY.md, scripts/fuzz). Not a dependency of any library product.
        .executable(name: "parley-fuzz", targets: ["ParleyFuzz"]),
    ],
    traits: [
        .trait(
            name: "Server",
            description: "The server, the CLI and the load tool, with their dependencies. Off: the SDK's alone."
        ),
        .default(enabledTraits: ["Server"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/swift-websocket.git", from: "1.6.2"),
        .package(url: "https://github.com/hummingbird-project/swift-openapi-hummingbird.git", from: "2.1.0"),
        .package(url: "https://github.com/apple/swift-openapi-runtime.git", from: "1.13.4"),
        .package(url: "https://github.com/apple/swift-openapi-urlsession.git", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.25.0"),
        .package(url: "https://github.com/jpsim/Yams.git", "5.0.1"..<"7.0.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // Traces (off by default): spans of REST requests and WebSocket commands, exported over OTLP/HTTP. Only the
        // OTLP/HTTP exporter: the gRPC one would build gRPC for nothing.
        .package(url: "https://github.com/swift-otel/swift-otel.git", from: "1.6.0", traits: ["OTLPHTTP"]),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        // The server's config file (JSON or YAML) and environment, under its command-line options.
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.4.0", traits: [.defaults, "YAML"]),
        .package(url: "https://github.com/apple/swift-system.git", from: "1.5.0"),
        // `swift package generate-documentation`: the SDK's DocC reference (scripts/check-docs, docs/SDK.md).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.4.0"),
    ],
    targets: [
        // Wire types shared by the server and the SDK: REST bodies, WebSocket frames, events, error codes.
        .target(name: "ParleyProtocol", swiftSettings: fuzzed),
        // The REST API's types, generated from Sources/ParleyAPI/openapi.yaml (the source of truth for the REST API);
        // its client (the SDK's) and its server are generated apart over them, so an app's build generates no server
        // code.
        .target(
            name: "ParleyAPI",
            dependencies: [
                "ParleyProtocol",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            ],
            // Generated/ is written by scripts/generate-api from these two (checked in: an app's build runs no plugin).
            exclude: ["openapi.yaml", "openapi-generator-config.yaml"]
        ),
        .target(
            name: "ParleyAPIClient",
            dependencies: [
                "ParleyProtocol", "ParleyAPI",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            ],
            // Generated/ is written by scripts/generate-api from these two (checked in: an app's build runs no plugin).
            exclude: ["openapi.yaml", "openapi-generator-config.yaml"]
        ),
        .target(
            name: "ParleyAPIServer",
            dependencies: [
                "ParleyProtocol", "ParleyAPI",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime", condition: server),
            ],
            // Generated/ is written by scripts/generate-api from these two (checked in: an app's build runs no plugin).
            exclude: ["openapi.yaml", "openapi-generator-config.yaml"]
        ),
        // A small NATS client on SwiftNIO (the path between server nodes), independent of Parley's types.
        .target(
            name: "NATSNIO",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio", condition: server),
                .product(name: "NIOPosix", package: "swift-nio", condition: server),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio", condition: server),
                .product(name: "Logging", package: "swift-log", condition: server),
            ],
            swiftSettings: fuzzed
        ),
        // Storage protocol and records.
        .target(name: "ParleyStore", dependencies: ["ParleyProtocol"], swiftSettings: fuzzed),
        // SQLite storage (GRDB).
        .target(
            name: "ParleyStoreSQLite",
            dependencies: [
                "ParleyStore", .product(name: "GRDB", package: "GRDB.swift", condition: server),
                .product(name: "GRDBSQLite", package: "GRDB.swift", condition: server),
            ]
        ),
        // PostgreSQL storage (postgres-nio): several server nodes may share one database.
        .target(
            name: "ParleyStorePostgres",
            dependencies: [
                "ParleyStore",
                .product(name: "PostgresNIO", package: "postgres-nio", condition: server),
                .product(name: "NIOSSL", package: "swift-nio-ssl", condition: server),
                .product(name: "NIOCore", package: "swift-nio", condition: server),
                .product(name: "NIOPosix", package: "swift-nio", condition: server),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio", condition: server),
                .product(name: "Logging", package: "swift-log", condition: server),
            ]
        ),
        // The commit the build is from (`parley_build_info`), as a C string the manifest defines.
        .target(name: "CParleyBuild", cSettings: [.define("PARLEY_COMMIT", to: "\"\(commit)\"")]),
        // The server library: buildApplication(_:), REST, WebSocket gateway, fan-out hub, auth.
        .target(
            name: "ParleyServer",
            dependencies: [
                "ParleyProtocol", "ParleyAPI", "ParleyAPIServer", "ParleyStore", "ParleyStoreSQLite", "NATSNIO",
                .target(name: "CParleyBuild", condition: server),
                .product(name: "Hummingbird", package: "hummingbird", condition: server),
                .product(name: "OpenAPIHummingbird", package: "swift-openapi-hummingbird", condition: server),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime", condition: server),
                .product(name: "Crypto", package: "swift-crypto", condition: server),
                .product(name: "Logging", package: "swift-log", condition: server),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: server),
                .product(name: "NIOCore", package: "swift-nio", condition: server),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio", condition: server),
                .product(name: "NIOWebSocket", package: "swift-nio", condition: server),
                .product(name: "NIOHTTP1", package: "swift-nio", condition: server),
                .product(name: "HTTPTypes", package: "swift-http-types", condition: server),
                // The WebSocket upgrade next to Hummingbird's HTTP/1 channel (ParleyHTTPChannel).
                .product(name: "HummingbirdCore", package: "hummingbird", condition: server),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras", condition: server),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras", condition: server),
                // The listening socket of ParleyHTTPServer.
                .product(name: "NIOPosix", package: "swift-nio", condition: server),
                // The APNs provider: HTTP/2 over TLS with connection reuse.
                .product(name: "AsyncHTTPClient", package: "async-http-client", condition: server),
                .product(name: "NIOSSL", package: "swift-nio-ssl", condition: server),
                // Metrics: swift-metrics, printed by swift-prometheus on GET /metrics.
                .product(name: "CoreMetrics", package: "swift-metrics", condition: server),
                .product(name: "Prometheus", package: "swift-prometheus", condition: server),
                // Traces: the tracing API, and swift-otel's OTLP exporter behind it.
                .product(name: "Tracing", package: "swift-distributed-tracing", condition: server),
                .product(name: "OTel", package: "swift-otel", condition: server),
                // Attachments: files streamed from and to disk.
                .product(name: "_NIOFileSystem", package: "swift-nio", condition: server),
            ],
            // The web console's HTML, CSS and JavaScript, served under /console/ (docs/CONSOLE.md).
            resources: [.copy("Console/web")],
            swiftSettings: fuzzed
        ),
        // Where the server's options come from: the environment and the config file (a library, so that the fuzz
        // targets load files with it).
        .target(
            name: "ParleyServerSettings",
            dependencies: [
                .product(name: "ArgumentParser", package: "swift-argument-parser", condition: server),
                .product(name: "Configuration", package: "swift-configuration", condition: server),
                .product(name: "SystemPackage", package: "swift-system", condition: server),
                .product(name: "Yams", package: "Yams", condition: server),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio", condition: server),
            ],
            swiftSettings: fuzzed
        ),
        .executableTarget(
            name: "ParleyServerApp",
            dependencies: [
                "ParleyServer", "ParleyServerSettings", "ParleyStorePostgres", "ParleyStoreSQLite",
                .product(name: "ArgumentParser", package: "swift-argument-parser", condition: server),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio", condition: server),
            ]
        ),
        // The client SDK.
        .target(
            name: "Parley",
            dependencies: [
                "ParleyProtocol", "ParleyAPI", "ParleyAPIClient",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIURLSession", package: "swift-openapi-urlsession"),
                // The WebSocket where URLSession has none (Linux): SwiftNIO's. Apple platforms use URLSession's and
                // link neither SwiftNIO's sockets nor its TLS.
                .product(
                    name: "WSClient", package: "swift-websocket",
                    condition: .when(platforms: [.linux, .android, .windows, .openbsd])
                ),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(
                    name: "NIOWebSocket", package: "swift-nio",
                    condition: .when(platforms: [.linux, .android, .windows, .openbsd])
                ),
                // Downloads are checked against the SHA-256 the server recorded at the upload.
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .executableTarget(
            name: "ParleyCLI",
            dependencies: [
                "Parley",
                .product(name: "ArgumentParser", package: "swift-argument-parser", condition: server),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio", condition: server),
            ]
        ),
        // Helpers for tests: a live server on port 0 in a temporary directory (SQLite, or PostgreSQL), a fresh
        // PostgreSQL database per test, a fault-injecting TCP proxy.
        .target(
            name: "ParleyTesting",
            dependencies: [
                "ParleyServer", "ParleyStore", "ParleyStoreSQLite", "ParleyStorePostgres", "Parley",
                .product(name: "PostgresNIO", package: "postgres-nio", condition: server),
                .product(name: "NIOCore", package: "swift-nio", condition: server),
                .product(name: "NIOPosix", package: "swift-nio", condition: server),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio", condition: server),
                .product(name: "Logging", package: "swift-log", condition: server),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: server),
                // The APNs stand-in: an HTTP/2 server over TLS with a certificate made for the test.
                .product(name: "NIOHTTP2", package: "swift-nio-http2", condition: server),
                .product(name: "NIOHTTP1", package: "swift-nio", condition: server),
                .product(name: "NIOSSL", package: "swift-nio-ssl", condition: server),
                .product(name: "X509", package: "swift-certificates", condition: server),
                .product(name: "SwiftASN1", package: "swift-asn1", condition: server),
                .product(name: "Crypto", package: "swift-crypto", condition: server),
            ]
        ),
        // `parley-bench`: drives a real parley-server over real WebSockets on loopback (docs/BENCHMARKS.md). Speaks
        // the protocol with its own small NIO clients: the SDK is too heavy for tens of thousands of sockets.
        .executableTarget(
            name: "ParleyBench",
            dependencies: [
                "ParleyProtocol",
                // The offline store's scenario (offline-store) opens the SDK's store directly; `search` the server's.
                "Parley", "ParleyStore", "ParleyStoreSQLite", "ParleyStorePostgres",
                .product(name: "Logging", package: "swift-log", condition: server),
                .product(name: "ArgumentParser", package: "swift-argument-parser", condition: server),
                .product(name: "Histogram", package: "hdrhistogram-swift", condition: server),
                .product(name: "NIOCore", package: "swift-nio", condition: server),
                .product(name: "NIOPosix", package: "swift-nio", condition: server),
                .product(name: "NIOHTTP1", package: "swift-nio", condition: server),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio", condition: server),
                // relay-floor's storing relay writes its log with SQLite as the server does.
                .product(name: "GRDB", package: "GRDB.swift", condition: server),
            ],
            path: "Benchmarks/ParleyBench"
        ),
        // The fuzz targets: the parsers and guards of the edge fed any bytes, with the properties each must keep
        // (docs/RELIABILITY.md). Run under libFuzzer by scripts/fuzz; their corpora replayed by FuzzTests.
        .target(
            name: "ParleyFuzzTargets",
            dependencies: [
                "ParleyProtocol", "ParleyStore", "ParleyServer", "ParleyServerSettings", "NATSNIO",
                .product(name: "ArgumentParser", package: "swift-argument-parser", condition: server),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio", condition: server),
                .product(name: "NIOCore", package: "swift-nio", condition: server),
                .product(name: "NIOEmbedded", package: "swift-nio", condition: server),
                .product(name: "NIOHTTP1", package: "swift-nio", condition: server),
                .product(name: "NIOWebSocket", package: "swift-nio", condition: server),
            ],
            path: "Fuzz/Targets",
            swiftSettings: fuzzed
        ),
        .executableTarget(
            name: "ParleyFuzz", dependencies: ["ParleyFuzzTargets"], path: "Fuzz/Driver",
            swiftSettings: fuzzed + (fuzzing ? [.define("PARLEY_FUZZING")] : []),
            // lld: gold fails on the sanitizers' objects ("internal error in format_file_lineno").
            linkerSettings: fuzzing ? [.unsafeFlags(["-sanitize=fuzzer,address", "-use-ld=lld"])] : []
        ),
        // The README's SDK example, compiled as written (ReadmeExampleTests keeps the README's copy the same).
        .executableTarget(name: "ReadmeExample", dependencies: ["Parley"], path: "Examples/ReadmeExample"),
        .testTarget(name: "ParleyProtocolTests", dependencies: ["ParleyProtocol"]),
        .testTarget(
            name: "NATSNIOTests",
            dependencies: [
                "NATSNIO", "ParleyTesting",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "ParleyStoreTests",
            dependencies: [
                "ParleyStore", "ParleyStoreSQLite", "ParleyStorePostgres", "ParleyTesting",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            // Databases written by an earlier release, read by the migration tests from the source tree.
            exclude: ["Fixtures"]
        ),
        .testTarget(
            name: "ParleyServerTests",
            dependencies: [
                "ParleyServer", "ParleyTesting", "ParleyProtocol",
                .product(name: "Yams", package: "Yams"),
                .product(name: "WSClient", package: "swift-websocket"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
                // A tracer that keeps its spans, for the command spans' outcomes.
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                "ParleyStoreSQLite",
            ],
            resources: []
        ),
        .testTarget(name: "ParleyTests", dependencies: ["Parley", "ParleyTesting"]),
        .testTarget(name: "FuzzTests", dependencies: ["ParleyFuzzTargets"]),
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "Parley", "ParleyTesting", "ParleyServer", "ParleyStorePostgres", "NATSNIO",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                // Webhook tests check signatures independently of the server's code.
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
    ]
)
