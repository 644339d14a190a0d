package import OpenAPIRuntime

/// The coding configuration the generated server and client share: compact JSON, like the WebSocket frames.
package let parleyOpenAPIConfiguration = Configuration(jsonEncodingOptions: [.withoutEscapingSlashes])
