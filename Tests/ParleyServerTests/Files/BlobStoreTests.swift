import Crypto
import Foundation
import NIOCore
import ParleyTesting
import Testing

@testable import ParleyServer

/// The stores of attachment bytes: a folder on disk, and S3-compatible storage (moto in server mode, started by
/// scripts/test through scripts/with-s3), with one contract.
@Suite(.timeLimit(.minutes(2))) struct BlobStoreTests {
    static var s3URL: URL? { ProcessInfo.processInfo.environment["PARLEY_TEST_S3_URL"].flatMap(URL.init(string:)) }

    /// AWS's own example (S3 documentation, "GET Object" signed with a Range header), and a path-style PUT with a port
    /// and a payload hash as botocore 1.x signs it.
    @Test func signaturesMatchKnownAnswers() {
        let aws = SigV4(
            accessKeyId: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            region: "us-east-1"
        )
        let get = aws.sign(
            method: "GET", url: URL(string: "https://examplebucket.s3.amazonaws.com/test.txt")!,
            headers: [("Host", "examplebucket.s3.amazonaws.com"), ("Range", "bytes=0-9")],
            payloadHash: SigV4.emptyPayloadHash, date: Date(timeIntervalSince1970: 1_369_353_600)
        )
        #expect(
            get.first { $0.0 == "Authorization" }?.1
                == "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        )
        #expect(get.first { $0.0 == "x-amz-date" }?.1 == "20130524T000000Z")

        let local = SigV4(accessKeyId: "parley", secretAccessKey: "secret-key", region: "eu-west-1")
        let put = local.sign(
            method: "PUT", url: URL(string: "http://127.0.0.1:9000/parley-bucket/app_1/att-2")!,
            headers: [("host", "127.0.0.1:9000"), ("content-type", "image/png"), ("content-length", "5")],
            payloadHash: Secrets.hex(SHA256.hash(data: Array("hello".utf8))),
            date: Date(timeIntervalSince1970: 1_795_698_000)
        )
        #expect(
            put.first { $0.0 == "Authorization" }?.1
                == "AWS4-HMAC-SHA256 Credential=parley/20261126/eu-west-1/s3/aws4_request, SignedHeaders=content-length;content-type;host;x-amz-content-sha256;x-amz-date, Signature=cd3b0703d6e28aab671c9c4ea22b28e108cd1a71bd3afbbfc13835792b1e47a9"
        )
    }

    @Test func keysCannotClimbOutOrCarryStrangeBytes() throws {
        for bad in ["", "/a", "a/", "a//b", "../a", "a/../b", "a/./b", "a b", "a\u{0}b", "é", "a/b/c/d/e/f/g/h/i"] {
            #expect(throws: BlobStoreError.self, "\(bad)") { try BlobKey(bad) }
        }
        #expect(try BlobKey("app_1/att-2_x").description == "app_1/att-2_x")
    }

    @Test func aFolderOnDiskKeepsTheContract() async throws {
        let root = try TemporaryDirectory(prefix: "parley-blobs").path + "/files"
        try await Self.contract(DiskBlobStore(root: root))
        // Nothing is left beside the blobs (no temporary files).
        let left = try FileManager.default.subpathsOfDirectory(atPath: root).filter { $0.contains(".incoming") }
        #expect(left.isEmpty)
    }

    @Test(.enabled(if: BlobStoreTests.s3URL != nil, "needs PARLEY_TEST_S3_URL (scripts/test starts moto)"))
    func s3CompatibleStorageKeepsTheContract() async throws {
        let store = S3BlobStore(
            configuration: .init(
                endpoint: try #require(Self.s3URL), bucket: "parley-test-\(UInt32.random(in: 0...UInt32.max))",
                region: "us-east-1", accessKeyId: "parley", secretAccessKey: "parley-secret"
            )
        )
        try await store.ensureBucket()
        try await store.ensureBucket()  // twice is fine
        try await Self.contract(store)
    }

    /// Put, size, full and partial reads, replace, delete, on 1.5 MiB (six chunks) and 1 byte and 0 bytes.
    static func contract(_ store: some BlobStore) async throws {
        let directory = try TemporaryDirectory(prefix: "parley-spool").path
        let bytes = FileTransferTests.randomBytes(1536 * 1024 + 17)
        let file = directory + "/upload"
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        let key = try BlobKey("app_1/att_big")
        #expect(try await store.size(of: key) == nil)
        await #expect(throws: BlobStoreError.notFound("app_1/att_big")) {
            try await store.read(key, range: 0..<1) { _ in }
        }
        try await store.put(
            key: key, file: file, size: Int64(bytes.count), sha256: Array(SHA256.hash(data: bytes)),
            contentType: "application/octet-stream"
        )
        #expect(!FileManager.default.fileExists(atPath: file), "the store takes the spooled file")
        #expect(try await store.size(of: key) == Int64(bytes.count))
        #expect(try await read(store, key, 0..<Int64(bytes.count)) == bytes)
        let end = Int64(bytes.count)
        for range: Range<Int64> in [0..<10, 300_000..<1_300_001, (end - 1)..<end, 5..<5] {
            #expect(try await read(store, key, range) == Array(bytes[Int(range.lowerBound)..<Int(range.upperBound)]))
        }
        // Chunks stay small: no whole file in memory.
        var largest = 0
        try await store.read(key, range: 0..<end) { largest = max(largest, $0.readableBytes) }
        #expect(largest <= 1024 * 1024)

        // Replace with one byte, then an empty blob.
        for replacement in [[UInt8(7)], []] {
            try Data(replacement).write(to: URL(fileURLWithPath: file))
            try await store.put(
                key: key, file: file, size: Int64(replacement.count),
                sha256: Array(SHA256.hash(data: replacement)), contentType: "text/plain"
            )
            #expect(try await store.size(of: key) == Int64(replacement.count))
            #expect(try await read(store, key, 0..<Int64(replacement.count)) == replacement)
        }
        try await store.delete(key)
        try await store.delete(key)  // twice is fine
        #expect(try await store.size(of: key) == nil)
    }

    static func read(_ store: some BlobStore, _ key: BlobKey, _ range: Range<Int64>) async throws -> [UInt8] {
        var out: [UInt8] = []
        try await store.read(key, range: range) { out += Array(buffer: $0) }
        return out
    }
}
