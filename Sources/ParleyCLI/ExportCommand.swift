import ArgumentParser
import Foundation
import Parley

extension Admin {
    /// `parley admin export UID --output DIR`: one user's data as `export.json` plus their files.
    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Export a user's data: export.json (profile, memberships, messages they sent) and their files.",
            discussion: """
                Writes DIR/export.json and each file of the user's messages to DIR/files/<file id>/<its name>, each \
                checked against its size and SHA-256. DIR is created; an existing DIR must be empty.
                """
        )
        @OptionGroup var key: KeyOptions
        @Argument(help: "The user's uid.") var uid: String
        @Option(name: .shortAndLong, help: "The folder to write (created; must be empty).") var output: String

        /// What `export.json` holds.
        struct Document: Encodable {
            /// Where a file of the user's messages was saved, relative to the folder.
            struct SavedFile: Encodable {
                var id: String
                var conversationId: String
                var messageId: String
                var name: String
                var path: String
            }

            var exportedAt: Int64
            var user: User
            var memberships: [UserMembership]
            var messages: [Message]
            var files: [SavedFile]
        }

        func run() async throws {
            try await reportingFailures {
                let admin = try key.admin()
                let folder = URL(fileURLWithPath: output, isDirectory: true)
                try Self.prepare(folder)
                var page = try await admin.exportUser(uid)
                let user = page.user
                let memberships = page.memberships ?? []
                var messages = page.messages
                while let cursor = page.nextCursor {
                    page = try await admin.exportUser(uid, cursor: cursor)
                    messages += page.messages
                }
                var files: [Document.SavedFile] = []
                for message in messages {
                    for file in message.files {
                        let directory = folder.appendingPathComponent("files/\(file.id)", isDirectory: true)
                        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                        let saved = try await admin.downloadFile(file.id, in: message.conversationId, to: directory)
                        files.append(
                            Document.SavedFile(
                                id: file.id, conversationId: message.conversationId, messageId: message.id,
                                name: file.name, path: "files/\(file.id)/\(saved.lastPathComponent)"
                            )
                        )
                    }
                }
                let document = Document(
                    exportedAt: Int64((Date().timeIntervalSince1970 * 1000).rounded()), user: user,
                    memberships: memberships, messages: messages, files: files
                )
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                try encoder.encode(document).write(to: folder.appendingPathComponent("export.json"))
                say(
                    "Exported \(user.uid): \(memberships.count) conversations, \(messages.count) messages, "
                        + "\(files.count) files to \(folder.path)"
                )
            }
        }

        /// Creates `folder`, or accepts an empty one.
        static func prepare(_ folder: URL) throws {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: folder.path, isDirectory: &isDirectory) {
                guard isDirectory.boolValue, (try FileManager.default.contentsOfDirectory(atPath: folder.path)).isEmpty
                else { throw CLIFailure.usage("\(folder.path) exists and is not an empty folder.") }
            } else {
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            }
        }
    }
}
