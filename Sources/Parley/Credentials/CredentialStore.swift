import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where the SDK keeps the signed-in user's auth token, a secret: the rest of the session (the user, the server) is a
/// JSON file in the storage directory, the token is here.
///
/// The defaults: the Keychain on Apple platforms (`KeychainCredentialStore`: readable after the first unlock, never
/// backed up or moved to another device), a file only its owner can read on Linux (``FileCredentialStore``).
/// `AppSettings.Builder().credentialStore(_:)` replaces it (an app group's Keychain, a test's store in memory).
public protocol CredentialStore: Sendable {
    /// The token saved for `account` (the App ID), or nil.
    func token(for account: String) throws -> String?
    /// Saves (or replaces) the token of `account`.
    func setToken(_ token: String, for account: String) throws
    /// Forgets the token of `account` (nothing to forget is not an error).
    func removeToken(for account: String) throws
}

/// Tokens in files of their own (`<directory>/<account>.token`), created readable and writable by their owner only
/// (0600, in a 0700 folder), replaced atomically.
public struct FileCredentialStore: CredentialStore {
    /// The folder of the token files.
    public let directory: URL

    /// A store in `directory` (created when the first token is saved).
    public init(directory: URL) {
        self.directory = directory
    }

    /// The file of `account`'s token.
    public func fileURL(_ account: String) -> URL {
        directory.appendingPathComponent(SessionStore.safeName(account) + ".token")
    }

    public func token(for account: String) throws -> String? {
        let url = fileURL(account)
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        do {
            return String(decoding: try Data(contentsOf: url), as: UTF8.self)
        } catch {
            throw ParleyError(.storageError, "The auth token could not be read.", underlying: "\(error)")
        }
    }

    public func setToken(_ token: String, for account: String) throws {
        do {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700]
            )
        } catch {
            throw ParleyError(.storageError, "The credentials folder could not be made.", underlying: "\(error)")
        }
        // Made 0600 from the start (no moment with the umask's permissions), then renamed over the old one.
        let target = fileURL(account)
        let temporary = target.path + ".\(UUID().uuidString).tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard descriptor >= 0 else {
            throw ParleyError(.storageError, "The auth token could not be saved.", underlying: "errno \(errno)")
        }
        let bytes = Array(token.utf8)
        let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        close(descriptor)
        guard written == bytes.count, rename(temporary, target.path) == 0 else {
            unlink(temporary)
            throw ParleyError(.storageError, "The auth token could not be saved.", underlying: "errno \(errno)")
        }
    }

    public func removeToken(for account: String) throws {
        let url = fileURL(account)
        guard FileManager.default.fileExists(atPath: url.path) else { return }
        do {
            try FileManager.default.removeItem(at: url)
        } catch {
            throw ParleyError(.storageError, "The auth token could not be removed.", underlying: "\(error)")
        }
    }
}

#if canImport(Security)
    import Security

    /// Tokens in the Keychain: generic passwords of ``service`` (and ``accessGroup``, to share them with an app
    /// extension), readable after the device's first unlock and never backed up or moved to another device
    /// (`kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`): a background refresh can read them, a restored backup
    /// cannot.
    public struct KeychainCredentialStore: CredentialStore {
        /// The Keychain service of the tokens (`kSecAttrService`).
        public let service: String
        /// The Keychain access group shared with the app's extensions (`kSecAttrAccessGroup`); nil for the app's own.
        public let accessGroup: String?

        /// A store of `service`'s generic passwords, in `accessGroup` when given.
        public init(service: String = "parley.auth-token", accessGroup: String? = nil) {
            self.service = service
            self.accessGroup = accessGroup
        }

        private func query(_ account: String) -> [String: Any] {
            var query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword,
                kSecAttrService as String: service,
                kSecAttrAccount as String: account,
            ]
            if let accessGroup { query[kSecAttrAccessGroup as String] = accessGroup }
            return query
        }

        public func token(for account: String) throws -> String? {
            var search = query(account)
            search[kSecReturnData as String] = true
            search[kSecMatchLimit as String] = kSecMatchLimitOne
            var item: CFTypeRef?
            let status = SecItemCopyMatching(search as CFDictionary, &item)
            if status == errSecItemNotFound { return nil }
            guard status == errSecSuccess, let data = item as? Data else { throw Self.failure(status, "read") }
            return String(decoding: data, as: UTF8.self)
        }

        public func setToken(_ token: String, for account: String) throws {
            let attributes: [String: Any] = [
                kSecValueData as String: Data(token.utf8),
                kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
            ]
            var status = SecItemUpdate(query(account) as CFDictionary, attributes as CFDictionary)
            if status == errSecItemNotFound {
                let item = query(account).merging(attributes) { _, new in new }
                status = SecItemAdd(item as CFDictionary, nil)
            }
            guard status == errSecSuccess else { throw Self.failure(status, "save") }
        }

        public func removeToken(for account: String) throws {
            let status = SecItemDelete(query(account) as CFDictionary)
            guard status == errSecSuccess || status == errSecItemNotFound else { throw Self.failure(status, "remove") }
        }

        static func failure(_ status: OSStatus, _ action: String) -> ParleyError {
            ParleyError(
                .storageError, "The Keychain could not \(action) the auth token.", underlying: "OSStatus \(status)")
        }
    }
#endif
