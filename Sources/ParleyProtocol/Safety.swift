/// A user the caller blocked: `GET /v1/me/blocks`, `PUT /v1/me/blocks/{uid}`.
public struct BlockedUser: Codable, Sendable, Hashable {
    /// The blocked user.
    public var uid: String
    /// When the block was made (epoch ms); blocking again keeps the first time.
    public var blockedAt: Int64
    /// Creates a block.
    public init(uid: String, blockedAt: Int64) {
        self.uid = uid
        self.blockedAt = blockedAt
    }
}

/// `GET /v1/me/blocks`: the users the caller blocked, most recent first.
public struct BlockList: Codable, Sendable, Hashable {
    /// The blocks.
    public var blocks: [BlockedUser]
    /// Creates a list of blocks.
    public init(blocks: [BlockedUser]) { self.blocks = blocks }
}

/// Why something is reported.
public enum ReportReason: String, Codable, Sendable, Hashable, CaseIterable {
    /// Unwanted or repeated content.
    case spam
    /// Harassment or bullying.
    case harassment
    /// Hate speech.
    case hate
    /// Violence or threats.
    case violence
    /// Sexual content.
    case sexual
    /// Self-harm.
    case selfHarm
    /// Pretending to be someone else.
    case impersonation
    /// Anything else; the details say what.
    case other
}

/// Where a report is in the app's moderation.
public enum ReportState: String, Codable, Sendable, Hashable, CaseIterable {
    /// Waiting for a moderator.
    case open
    /// A moderator dealt with it.
    case resolved
}

/// `PUT /v1/conversations/{conversationId}/participants/{uid}/mute`: mutes a participant, until `until` (epoch ms, in
/// the future) or until the mute is lifted.
public struct MuteRequest: Codable, Sendable, Hashable {
    /// When the mute ends (epoch ms); nil for one that lasts until it is lifted.
    public var until: Int64?
    /// Creates a request.
    public init(until: Int64? = nil) { self.until = until }
}

/// `PUT /v1/conversations/{conversationId}/bans/{uid}`: bans a user from a group, until `until` (epoch ms, in the
/// future) or until the ban is lifted, saying why in `reason` (at most 1 KiB, shown to moderators and to the banned
/// user's client in the event).
public struct BanRequest: Codable, Sendable, Hashable {
    /// When the ban ends (epoch ms); nil for one that lasts until it is lifted.
    public var until: Int64?
    /// Why, at most 1 KiB.
    public var reason: String?
    /// Creates a request.
    public init(until: Int64? = nil, reason: String? = nil) {
        self.until = until
        self.reason = reason
    }
}

/// A user banned from a group: removed when they were in it, and kept out (they cannot join, be added or read it)
/// until `until` passes or the ban is lifted.
public struct ConversationBan: Codable, Sendable, Hashable {
    /// The group.
    public var conversationId: String
    /// The banned user.
    public var uid: String
    /// Who banned them (or last changed the ban); absent when the app's server did, with its REST API key.
    public var bannedBy: String?
    /// Why, as the one who banned gave it.
    public var reason: String?
    /// When the ban ends (epoch ms); absent for one that lasts until it is lifted.
    public var until: Int64?
    /// When the ban was made (epoch ms); changing its end or reason keeps it.
    public var createdAt: Int64

    /// Creates a ban.
    public init(
        conversationId: String, uid: String, bannedBy: String? = nil, reason: String? = nil, until: Int64? = nil,
        createdAt: Int64
    ) {
        self.conversationId = conversationId
        self.uid = uid
        self.bannedBy = bannedBy
        self.reason = reason
        self.until = until
        self.createdAt = createdAt
    }

    /// Whether the ban holds at `now` (epoch ms): one whose `until` passed counts as no ban.
    public func isActive(at now: Int64) -> Bool {
        until.map { $0 > now } ?? true
    }
}

/// `GET /v1/conversations/{conversationId}/bans`: the bans of a group that hold now, newest first.
public struct BanList: Codable, Sendable, Hashable {
    /// The bans.
    public var bans: [ConversationBan]
    /// Creates a list of bans.
    public init(bans: [ConversationBan]) { self.bans = bans }
}

/// `POST /v1/reports`: a message (`conversationId` and `messageId`) or a user (`uid`) is reported.
public struct CreateReportRequest: Codable, Sendable, Hashable {
    /// For a message report: the message's conversation.
    public var conversationId: String?
    /// For a message report: the message.
    public var messageId: String?
    /// For a user report: the user.
    public var uid: String?
    /// Why it is reported.
    public var reason: ReportReason
    /// What the reporter adds, at most 1 KiB.
    public var details: String?
    /// Creates a report of a message (`conversationId` and `messageId`) or of a user (`uid`).
    public init(
        conversationId: String? = nil, messageId: String? = nil, uid: String? = nil, reason: ReportReason,
        details: String? = nil
    ) {
        self.conversationId = conversationId
        self.messageId = messageId
        self.uid = uid
        self.reason = reason
        self.details = details
    }
}

/// A report of a message or a user, as stored for the app's moderators.
public struct Report: Codable, Sendable, Hashable {
    /// The report's id.
    public var id: String
    /// Who reported.
    public var reporter: String
    /// The reported user: the message's sender, or the reported `uid`.
    public var uid: String
    /// For a message report: where, which, and the message as it was when it was reported (its content is kept for
    /// the moderators even if the message is edited or deleted later).
    public var conversationId: String?
    /// For a message report: the message's id.
    public var messageId: String?
    /// For a message report: the message as it was when it was reported.
    public var message: Message?
    /// Why it was reported.
    public var reason: ReportReason
    /// What the reporter added.
    public var details: String?
    /// Open or resolved.
    public var state: ReportState
    /// What the moderator noted when resolving it.
    public var resolution: String?
    /// When the report was made (epoch ms).
    public var createdAt: Int64
    /// When it was resolved (epoch ms); nil while open.
    public var resolvedAt: Int64?
    /// Creates a report from its stored fields.
    public init(
        id: String, reporter: String, uid: String, conversationId: String? = nil, messageId: String? = nil,
        message: Message? = nil, reason: ReportReason, details: String? = nil, state: ReportState,
        resolution: String? = nil, createdAt: Int64, resolvedAt: Int64? = nil
    ) {
        self.id = id
        self.reporter = reporter
        self.uid = uid
        self.conversationId = conversationId
        self.messageId = messageId
        self.message = message
        self.reason = reason
        self.details = details
        self.state = state
        self.resolution = resolution
        self.createdAt = createdAt
        self.resolvedAt = resolvedAt
    }
}

/// `GET /v1/reports`: a page of reports, oldest first.
public struct ReportList: Codable, Sendable, Hashable {
    /// The reports of the page.
    public var reports: [Report]
    /// Pass as `cursor` to get the next page; nil on the last page.
    public var nextCursor: String?
    /// Creates a page of reports.
    public init(reports: [Report], nextCursor: String? = nil) {
        self.reports = reports
        self.nextCursor = nextCursor
    }
}

/// `PATCH /v1/reports/{reportId}`: the app's moderator resolves (or reopens) a report.
public struct UpdateReportRequest: Codable, Sendable, Hashable {
    /// The new state.
    public var state: ReportState
    /// At most 1 KiB.
    public var resolution: String?
    /// Creates a request.
    public init(state: ReportState, resolution: String? = nil) {
        self.state = state
        self.resolution = resolution
    }
}
