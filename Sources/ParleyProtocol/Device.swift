/// The push service a device token belongs to. Only APNs for now.
public enum PushPlatform: String, Codable, Sendable, Hashable, CaseIterable {
    /// Apple Push Notification service.
    case apns
}

/// Which APNs environment issued a device token: apps built for development get `sandbox` tokens.
public enum PushEnvironment: String, Codable, Sendable, Hashable, CaseIterable {
    /// A token of an app signed for distribution (App Store, TestFlight, ad hoc).
    case production
    /// A token of an app signed for development.
    case sandbox
}

/// `PUT /v1/me/devices/{deviceId}`: the push token of one of the caller's devices.
public struct RegisterDeviceRequest: Codable, Sendable, Hashable {
    /// The push service of the token.
    public var platform: PushPlatform
    /// The token the platform gave the app, in hexadecimal (APNs: `deviceToken` bytes as hex).
    public var token: String
    /// The APNs environment that issued the token.
    public var environment: PushEnvironment

    /// Creates a registration (APNs by default).
    public init(platform: PushPlatform = .apns, token: String, environment: PushEnvironment) {
        self.platform = platform
        self.token = token
        self.environment = environment
    }
}

/// A device registered for push notifications by a user.
public struct Device: Codable, Sendable, Hashable {
    /// The app's identifier for the installation (stable per install): 1-100 letters, digits, `_`, `-`, `.` or `:`.
    public var deviceId: String
    /// The push service of the token.
    public var platform: PushPlatform
    /// The push token, lowercase hexadecimal.
    public var token: String
    /// The APNs environment that issued the token.
    public var environment: PushEnvironment
    /// When the device was first registered by this user (epoch ms).
    public var createdAt: Int64
    /// When the token last changed or was registered again (epoch ms).
    public var updatedAt: Int64

    /// Creates a device from its stored fields.
    public init(
        deviceId: String, platform: PushPlatform, token: String, environment: PushEnvironment, createdAt: Int64,
        updatedAt: Int64
    ) {
        self.deviceId = deviceId
        self.platform = platform
        self.token = token
        self.environment = environment
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    /// Whether `deviceId` is a valid device identifier (1-100 letters, digits, `_`, `-`, `.` or `:`).
    public static func isValidDeviceId(_ deviceId: String) -> Bool {
        guard (1...100).contains(deviceId.utf8.count) else { return false }
        return deviceId.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "."),
                UInt8(ascii: ":"):
                return true
            default:
                return false
            }
        }
    }

    /// The token in canonical form (lowercase hex), or nil when it is not an even number of 16 to 400 hex digits.
    public static func normalizedToken(_ token: String) -> String? {
        guard (16...400).contains(token.utf8.count), token.utf8.count.isMultiple(of: 2) else { return nil }
        guard token.utf8.allSatisfy({ $0 < 0x80 && $0.isHexDigit }) else { return nil }
        return token.lowercased()
    }
}

extension UInt8 {
    fileprivate var isHexDigit: Bool {
        switch self {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
            UInt8(ascii: "A")...UInt8(ascii: "F"):
            return true
        default:
            return false
        }
    }
}

/// `GET /v1/me/devices`
public struct DeviceList: Codable, Sendable, Hashable {
    /// The caller's devices.
    public var devices: [Device]
    /// Creates a list of devices.
    public init(devices: [Device]) { self.devices = devices }
}

/// Parley's part of a push notification's payload: `{"parley": {"conversationId": ..., "messageId": ..., "seq": ...}}`
/// next to the `aps` dictionary.
public struct PushPayload: Codable, Sendable, Hashable {
    /// The conversation of the message.
    public var conversationId: String
    /// The message that caused the push.
    public var messageId: String?
    /// The message's sequence number in its conversation.
    public var seq: Int64?
    /// True when the message mentions the recipient.
    public var mentioned: Bool?

    /// Creates a payload.
    public init(conversationId: String, messageId: String? = nil, seq: Int64? = nil, mentioned: Bool? = nil) {
        self.conversationId = conversationId
        self.messageId = messageId
        self.seq = seq
        self.mentioned = mentioned
    }
}
