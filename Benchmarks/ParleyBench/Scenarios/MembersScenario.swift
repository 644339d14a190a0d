import ArgumentParser
import Foundation
import ParleyProtocol

/// `members`: adding many members to a group in one REST call (`POST /v1/conversations/{id}/participants`), as an
/// app's server does when a team or a class is created. Creates `--members` users for each of `--groups` empty groups,
/// then adds each group's members in one call, one group after the other; reports each call's time (request to
/// answer, on loopback) and the server's CPU per call.
struct MembersScenario: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "members",
        abstract: "Time to add N members to a group in one REST call."
    )

    @Option(help: "Members added by each call.")
    var members: Int = 1000

    @Option(help: "Groups, each filled by one call (the first is a warm-up, not counted).")
    var groups: Int = 6

    @OptionGroup var server: ServerOptions
    @OptionGroup var client: ClientOptions

    struct Parameters: Codable, Sendable {
        var members: Int
        var groups: Int
    }

    struct Figures: Codable, Sendable {
        /// Each measured call, in milliseconds.
        var callMilliseconds: [Double]
        var medianMilliseconds: Double
        var serverCPUMillisecondsPerCall: Double?
    }

    func run() async throws {
        guard members > 0, groups > 1 else { throw ValidationError("--members > 0, --groups > 1") }
        try await BenchRun.run(scenario: "members", server: server, options: client) { run in
            let prefix = "g\(run.runID)-"
            run.note("creating \(members * groups) users and \(groups) groups")
            let owner = try await run.provisioner.users(prefix: prefix + "owner-", count: 1)[0]
            var uids: [[String]] = []
            for group in 0..<groups {
                let groupPrefix = "\(prefix)\(group)-"
                _ = try await run.provisioner.users(prefix: groupPrefix, count: members)
                uids.append((0..<members).map { "\(groupPrefix)\($0)" })
            }
            let ids = try await run.provisioner.groups(Array(repeating: (owner, []), count: groups))
            let connection = try await HTTPConnection.connect(
                to: run.provisioner.target, host: run.provisioner.hostHeader, group: run.group)
            defer { Task { await connection.close() } }

            run.startMeasuring()
            var calls: [Double] = []
            var cpu = 0.0
            for (index, id) in ids.enumerated() {
                let body = AddParticipantsRequest(participants: uids[index].map { .init(uid: $0, role: .member) })
                let cpuBefore = run.server.cpuSeconds()
                let start = Monotonic.nanoseconds()
                let answer = try await connection.json(
                    .POST, "/v1/conversations/\(id)/participants", headers: [("Authorization", "Bearer \(owner)")],
                    body: body)
                let milliseconds = Monotonic.seconds(since: start) * 1000
                guard answer.status == 200 else {
                    throw HTTPError(description: "POST participants: \(answer.status) \(answer.text)")
                }
                let added = try answer.decode(ParticipantList.self).participants.count
                guard added == members + 1 else { throw HTTPError(description: "\(added) participants after the call") }
                guard index > 0 else { continue }  // warm-up
                calls.append(milliseconds)
                if let before = cpuBefore, let after = run.server.cpuSeconds() { cpu += after - before }
            }
            let sorted = calls.sorted()
            let figures = Figures(
                callMilliseconds: calls, medianMilliseconds: sorted[sorted.count / 2],
                serverCPUMillisecondsPerCall: run.server.cpuSeconds() == nil ? nil : cpu * 1000 / Double(calls.count)
            )
            try run.report(
                line: "members=\(members) calls=\(calls.count) median=\(Format.fixed(figures.medianMilliseconds, 1))ms "
                    + "calls=[\(calls.map { Format.fixed($0, 1) }.joined(separator: ", "))]ms "
                    + "server_cpu/call=\(figures.serverCPUMillisecondsPerCall.map { Format.fixed($0, 1) } ?? "-")ms",
                parameters: Parameters(members: members, groups: groups), figures: figures
            )
        }
    }
}
