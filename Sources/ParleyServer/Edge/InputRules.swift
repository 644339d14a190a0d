import ParleyProtocol
import ParleyStore

/// The rules every string and number a client sends must follow, over REST and the WebSocket alike
/// (docs/PROTOCOL.md, "Limits"):
///
/// - U+0000 is refused in every string (SQLite would cut the string there, PostgreSQL refuses it): `ERR_BAD_REQUEST`;
/// - identifiers (ids, client message ids, refs, keys) are 1-128 bytes with no control character (U+0000-U+001F,
///   U+007F-U+009F): `ERR_BAD_REQUEST`;
/// - names keep every other character, up to a size: `ERR_FIELD_TOO_LARGE` past it, `ERR_BAD_REQUEST` for a control
///   character (a description may have line breaks and tabs);
/// - positions (`deliveredSeq`, `readSeq`, resume positions) are 0 or more; a token's lifetime is 1 s to 10 years.
enum InputRules {
    static let maxIdentifierBytes = 128
    static let maxNameBytes = 256
    static let maxDescriptionBytes = 4096
    static let maxAvatarURLBytes = 2048
    static let maxMetadataBytes = 16 * 1024
    /// Most participants named in one create or add request.
    static let maxParticipantsPerRequest = 1000
    /// Most seconds of a token's lifetime (`ttlSeconds`): ten years.
    static let maxTokenLifetimeSeconds: Int64 = 10 * 365 * 24 * 3600

    /// A uid: 1-100 letters, digits, `_`, `-`, `.` or `@` (``User/isValidUID(_:)``); `ERR_INVALID_UID` otherwise.
    static func uid(_ uid: String) throws {
        guard User.isValidUID(uid) else {
            throw DomainError(.invalidUID, "A uid is 1-100 letters, digits, '_', '-', '.' or '@'.")
        }
    }

    /// An identifier: 1 to `maxBytes` bytes of UTF-8, no control character.
    static func identifier(_ value: String, _ field: String, maxBytes: Int = maxIdentifierBytes) throws {
        guard (1...maxBytes).contains(value.utf8.count), !hasControlCharacter(value) else {
            throw DomainError(.badRequest, "\(field) must be 1-\(maxBytes) bytes without control characters.")
        }
    }

    static func identifier(_ value: String?, _ field: String, maxBytes: Int = maxIdentifierBytes) throws {
        if let value { try identifier(value, field, maxBytes: maxBytes) }
    }

    /// A name (of a user or a group) or a description: at most `maxBytes` bytes, no control character but, with
    /// `lineBreaks`, line feeds, carriage returns and tabs.
    static func name(_ value: String?, _ field: String, maxBytes: Int = maxNameBytes, lineBreaks: Bool = false) throws {
        guard let value else { return }
        guard value.utf8.count <= maxBytes else {
            throw DomainError(.fieldTooLarge, "\(field) may have at most \(maxBytes) bytes (UTF-8).")
        }
        let allowed: Set<Unicode.Scalar> = lineBreaks ? ["\n", "\r", "\t"] : []
        guard !value.unicodeScalars.contains(where: { isControl($0) && !allowed.contains($0) }) else {
            throw DomainError(.badRequest, "\(field) must not contain control characters.")
        }
    }

    /// A group's description: up to 4 KiB, with line breaks and tabs.
    static func description(_ value: String?) throws {
        try name(value, "description", maxBytes: maxDescriptionBytes, lineBreaks: true)
    }

    /// An avatar: an `http` or `https` URL of at most 2,048 bytes.
    static func avatarURL(_ value: String?) throws {
        guard let value else { return }
        guard value.utf8.count <= maxAvatarURLBytes else {
            throw DomainError(.fieldTooLarge, "avatarURL may have at most \(maxAvatarURLBytes) bytes.")
        }
        // Bytes, not characters: a combining mark after `/` or a space makes one character of the two, which a
        // character comparison would not see.
        let scheme = String(decoding: value.utf8.prefix(8), as: UTF8.self).lowercased()
        guard scheme.hasPrefix("https://") || scheme.hasPrefix("http://"), !hasControlCharacter(value),
            !value.utf8.contains(UInt8(ascii: " "))
        else {
            throw DomainError(.badRequest, "avatarURL must be an http or https URL.")
        }
    }

    /// The metadata of a user or a conversation: at most 16 KiB of JSON, no U+0000 in any of its strings.
    static func metadata(_ value: JSONValue?, _ field: String = "metadata") throws {
        guard let value else { return }
        try text(value, field)
        guard let bytes = try? WireCoding.encode(value), bytes.count <= maxMetadataBytes else {
            throw DomainError(.fieldTooLarge, "\(field) may have at most \(maxMetadataBytes) bytes of JSON.")
        }
    }

    /// Free text: anything but U+0000.
    static func text(_ value: String?, _ field: String) throws {
        guard let value, value.utf8.contains(0) else { return }
        throw DomainError(.badRequest, "\(field) must not contain U+0000.")
    }

    /// Every string of a JSON value (keys too): anything but U+0000.
    static func text(_ value: JSONValue, _ field: String) throws {
        switch value {
        case .null, .bool, .number:
            return
        case .string(let string):
            try text(string, field)
        case .array(let values):
            for value in values { try text(value, field) }
        case .object(let members):
            for (key, value) in members {
                try text(key, field)
                try text(value, field)
            }
        }
    }

    /// A message's content: no U+0000 anywhere in it.
    static func message(parts: [MessagePart], metadata: JSONValue?, alert: String?) throws {
        for part in parts {
            try text(part.text, "A message's text")
            try text(part.name, "A message part's name")
            if let data = part.data { try text(data, "A message's data") }
            switch (part.type, part.file) {
            case (.file, let file?):
                try identifier(file.id, "A file part's id")
                try text(file.preview, "A file part's preview")
                if let preview = file.preview, preview.utf8.count > FileInfo.maxPreviewBytes {
                    throw DomainError(
                        .fieldTooLarge, "A file part's preview may have at most \(FileInfo.maxPreviewBytes) bytes."
                    )
                }
            case (.file, nil):
                throw DomainError(
                    .badRequest, "A file part names its upload: {\"type\":\"file\",\"file\":{\"id\":...}}.")
            case (_, .some):
                throw DomainError(.badRequest, "Only a file part has a file.")
            case (_, nil):
                break
            }
        }
        if let metadata { try text(metadata, "metadata") }
        try text(alert, "alert")
    }

    /// A position in a stream: 0 or more.
    static func position(_ value: Int64?, _ field: String) throws {
        if let value, value < 0 { throw DomainError(.badRequest, "\(field) must be 0 or more.") }
    }

    /// A list of participants named in one request: at most ``maxParticipantsPerRequest``.
    static func participantCount(_ count: Int) throws {
        guard count <= maxParticipantsPerRequest else {
            throw DomainError(
                .fieldTooLarge, "At most \(maxParticipantsPerRequest) participants may be named in one request."
            )
        }
    }

    static func hasControlCharacter(_ value: String) -> Bool {
        value.unicodeScalars.contains(where: isControl)
    }

    /// Unicode's control characters (general category Cc).
    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }
}
