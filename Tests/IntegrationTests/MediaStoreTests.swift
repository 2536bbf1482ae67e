import Crypto
import Features
import Foundation
import Models
import Postgres
import Runtime
import XCTest

/// The signed URL path (and query) of image `id` at a service on `port`, as the services sign it.
private func signedPath(_ id: String, port: Int, route: String = "/v1/media") throws -> String {
    let urls = try MediaURLs(Environment(["MEDIA_URL_KEYS": TestEnvironment.mediaURLKeys, "PORT": String(port)]), defaultPort: port)
    return String(urls.url("\(route)/\(id)").dropFirst(urls.base.count))
}

/// The two stores by themselves: the signature as AWS specifies it, the settings, and a folder no key escapes.
final class BlobStoreTests: XCTestCase {
    /// AWS's own example of a signed GET Object (S3 API reference, "Signature Calculations for the Authorization
    /// Header: Example: GET Object"), whose signature AWS publishes.
    func testTheSignatureIsAWSsOwnForItsExample() {
        let signer = S3Signer(accessKeyId: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", region: "us-east-1")
        let empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        let authorization = signer.authorization(method: "GET", path: "/test.txt", query: [],
                                                 headers: [("Host", "examplebucket.s3.amazonaws.com"), ("Range", "bytes=0-9"),
                                                           ("x-amz-content-sha256", empty), ("x-amz-date", "20130524T000000Z")],
                                                 payloadHash: empty, amzDate: "20130524T000000Z")
        XCTAssertEqual(authorization, "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
                       + "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
                       + "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
    }

    func testAMalformedSettingIsNamed() {
        func problem(_ settings: [String: String]) -> String? {
            do { _ = try BlobStores.make(Environment(settings)); return nil } catch let e as ConfigError { return e.variable } catch { return "\(error)" }
        }
        let s3 = ["MEDIA_STORE": "s3", "S3_ENDPOINT": "http://127.0.0.1:9000", "S3_BUCKET": "media", "S3_ACCESS_KEY_ID": "key",
                  "S3_SECRET_ACCESS_KEY": "secret"]
        XCTAssertEqual(problem([:]), "MEDIA_STORE", "required: nobody's photos go where nobody meant")
        XCTAssertEqual(problem(["MEDIA_STORE": "ftp://example.com/media"]), "MEDIA_STORE")
        XCTAssertEqual(problem(["MEDIA_STORE": "file://relative/path"]), "MEDIA_STORE")
        XCTAssertEqual(problem(["MEDIA_STORE": "file:///proc/no-such-folder"]), "MEDIA_STORE", "a folder that cannot be made")
        XCTAssertNil(problem(s3))
        XCTAssertEqual(problem(s3.merging(["S3_ENDPOINT": "127.0.0.1:9000"]) { $1 }), "S3_ENDPOINT")
        XCTAssertEqual(problem(s3.merging(["S3_ENDPOINT": "http://127.0.0.1:9000/media"]) { $1 }), "S3_ENDPOINT", "the bucket is S3_BUCKET")
        XCTAssertEqual(problem(s3.merging(["S3_BUCKET": "Media_Photos"]) { $1 }), "S3_BUCKET")
        XCTAssertEqual(problem(s3.merging(["S3_REGION": "eu central"]) { $1 }), "S3_REGION")
        XCTAssertEqual(problem(s3.merging(["S3_ACCESS_KEY_ID": ""]) { $1 }), "S3_ACCESS_KEY_ID")
        XCTAssertEqual(problem(s3.merging(["S3_SECRET_ACCESS_KEY": ""]) { $1 }), "S3_SECRET_ACCESS_KEY")
    }

    func testTheFolderStoreKeepsEveryKeyInsideIt() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("blobs-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: root) }
        let store = try FileBlobStore(root: root.path)
        try store.put("stories/a1", [1, 2, 3], contentType: "image/jpeg")
        try store.put("stories/a1/320", [4], contentType: "image/jpeg")
        try store.put("stories/a1", [5, 6], contentType: "image/jpeg")  // overwritten whole
        XCTAssertEqual(try store.get("stories/a1"), [5, 6])
        XCTAssertEqual(try store.get("stories/a1/320"), [4])
        XCTAssertNil(try store.get("stories/none"))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("stories").path).sorted(),
                       ["a1", "a1.blob"], "the image's file, its renditions' folder, and no temporary file left behind")
        for key in ["../escape", "stories/../../escape", "/etc/passwd", "stories//a1", "", "stories/a1/", "stories/%2e%2e", "stories/a b",
                    "stories/a1.blob/320"] {
            XCTAssertThrowsError(try store.put(key, [0], contentType: "image/jpeg"), key)
            XCTAssertThrowsError(try store.get(key), key)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: root.deletingLastPathComponent().appendingPathComponent("escape").path))
        try store.delete("stories/a1/320")
        try store.delete("stories/a1/320")  // gone already: fine
        XCTAssertNil(try store.get("stories/a1/320"))
    }
}

/// Stories with its images in an S3 bucket (moto's server, checking every signature): nothing of an image is in
/// PostgreSQL, it is served by its signed URL from the bucket, and a take-down deletes its object.
final class MediaInABucketTests: StoriesTestCase {
    var s3: S3StandIn!
    let moderator = String(repeating: "m", count: 40)

    override var serviceSettings: [String: String] {
        super.serviceSettings.merging(s3.environment) { $1 }.merging(["OPERATOR_TOKEN": moderator]) { $1 }
    }

    override func setUpWithError() throws {
        s3 = try S3StandIn()
        try super.setUpWithError()
    }

    override func tearDown() {
        super.tearDown()
        s3?.stop()
    }

    func testAPhotoIsInTheBucketOnlyAndGoesWithItsTakenDownStory() throws {
        let ana = try person(), ben = try person()
        let family = try group(ana)
        XCTAssertEqual(try join(ben, family).status, 200)
        let upload = try api.send("POST", "/v1/media", raw: Images.decodablePNG, token: ana.token, headers: ["Content-Type": "image/png"])
        XCTAssertEqual(upload.status, 201, String(decoding: upload.body, as: UTF8.self))
        let id = try XCTUnwrap(upload["id"] as? String)

        let served = try api.get(try signedPath(id, port: stories.port))
        XCTAssertEqual(served.status, 200)
        XCTAssertFalse(served.body.isEmpty)
        let bucket = try s3.store()
        XCTAssertEqual(try bucket.get("stories/\(id)"), served.body, "served from the bucket")
        XCTAssertEqual(try count("media"), 1)
        XCTAssertEqual(try count("media", "bytes IS NOT NULL"), 0, "no bytes in the table")
        XCTAssertEqual(try database.connect().first("SELECT count(*)::int AS n FROM pg_largeobject_metadata")?["n", as: Int.self], 0,
                       "nor as a large object")
        let etag = try XCTUnwrap(served.headers["etag"] ?? served.headers["ETag"])
        XCTAssertEqual(try api.send("GET", try signedPath(id, port: stories.port), headers: ["If-None-Match": etag]).status, 304)

        let story = try api.post("/v1/stories", ["text": "Look", "groupIds": [family["id"] ?? ""], "mediaIds": [id]], token: ana.token)
        XCTAssertEqual(story.status, 201, String(decoding: story.body, as: UTF8.self))
        let report = try api.post("/v1/stories/\(story["id"] as? String ?? "")/reports", ["reason": "spam"], token: ben.token)
        XCTAssertEqual(report.status, 201, String(decoding: report.body, as: UTF8.self))
        XCTAssertEqual(try api.post("/v1/operator/stories/reports/\(report["id"] as? String ?? "")", ["action": "take_down"],
                                    token: moderator)["status"] as? String, "taken_down")
        XCTAssertEqual(try api.get(try signedPath(id, port: stories.port)).status, 404, "its URL loads nothing at once")
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 30, every: 0.25) {
            S3StandIn.absent("stories/\(id)", in: bucket)
        }, "its object is deleted")
        for variant in MediaStore.variants { XCTAssertNil(try bucket.get("stories/\(id)/\(variant)"), variant) }
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 10) { (try? self.count("media_removed")) == 0 })
    }

    func testAnErasedAccountsImagesLeaveTheBucket() throws {
        _ = auth.stop()  // auth again, on its port, erasing a deleted account at once
        auth = try ServiceProcess.startReady("auth", port: auth.port, environment: ["DATABASE_URL": database.url,
                                                                                   "ACCOUNT_DELETION_GRACE_HOURS": "0"])
        let ana = try person(), ben = try person()
        func upload(_ purpose: String, _ who: Person) throws -> String {
            let r = try api.send("POST", "/v1/media?purpose=\(purpose)", raw: Images.decodablePNG, token: who.token,
                                 headers: ["Content-Type": "image/png"])
            XCTAssertEqual(r.status, 201, String(decoding: r.body, as: UTF8.self))
            return r["id"] as? String ?? ""
        }
        let hers = [try upload("photo", ana), try upload("avatar", ana)], his = try upload("photo", ben)
        let bucket = try s3.store()
        for id in hers + [his] { XCTAssertNotNil(try bucket.get("stories/\(id)"), id) }

        let deleted = try accounts.send("DELETE", "/v1/users/me", json: ["password": "correct horse battery"], token: ana.token)
        XCTAssertEqual(deleted.status, 202, String(decoding: deleted.body, as: UTF8.self))
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 60, every: 0.25) {
            hers.allSatisfy { id in S3StandIn.absent("stories/\(id)", in: bucket) }
        }, "her images' objects are deleted")
        XCTAssertEqual(try count("media"), 1)
        XCTAssertNotNil(try bucket.get("stories/\(his)"), "his stays")
    }

    func testOnlyTheRightSecretIsAccepted() throws {
        let right = try s3.store(), wrong = try s3.store(secret: "not-the-secret-" + s3.secretAccessKey)
        try right.put("stories/probe", [1, 2, 3], contentType: "application/octet-stream")
        XCTAssertEqual(try right.get("stories/probe"), [1, 2, 3])
        XCTAssertThrowsError(try wrong.put("stories/probe", [9], contentType: "image/png")) {
            XCTAssertTrue("\($0)".contains("SignatureDoesNotMatch"), "\($0)")
        }
        XCTAssertThrowsError(try wrong.get("stories/probe"))
        XCTAssertThrowsError(try wrong.delete("stories/probe"))
        XCTAssertEqual(try right.get("stories/probe"), [1, 2, 3], "untouched")
        try right.delete("stories/probe")
        XCTAssertNil(try right.get("stories/probe"))
        try right.delete("stories/probe")
        let large = (0..<(10 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }  // the largest upload there is
        try right.put("stories/large", large, contentType: "image/jpeg")
        XCTAssertEqual(try right.get("stories/large"), large)
        try right.delete("stories/large")

        // A service holding the wrong secret fails an upload whole: no row names an object that is not there.
        let ana = try person()
        let broken = try startInstance(ownGroups: true, settings: ["S3_SECRET_ACCESS_KEY": "not-the-secret-" + s3.secretAccessKey])
        defer { _ = broken.stop() }
        let r = try APIClient(port: broken.port).send("POST", "/v1/media", raw: Images.decodablePNG, token: ana.token,
                                                      headers: ["Content-Type": "image/png"])
        XCTAssertEqual(r.status, 500)
        XCTAssertFalse(broken.log.contains(s3.secretAccessKey), "no secret in the log")
        XCTAssertEqual(try count("media"), 0)
    }
}

/// Images kept in the table by an earlier version move into the store (the local folder here) while the service
/// runs, in batches that each commit whole: stopped or killed at any moment, nothing is lost, and the next start
/// goes on. Every image loads by its signed URL throughout.
final class MediaMoveTests: StoriesTestCase {
    /// A store that fails from its `limit`th write on, as a process killed in the middle of a batch would stop.
    final class Failing: BlobStore, @unchecked Sendable {
        let inner: any BlobStore
        let limit: Int
        private var writes = 0
        private let lock = NSLock()
        init(_ inner: any BlobStore, failingAfter limit: Int) { self.inner = inner; self.limit = limit }
        func put(_ key: String, _ bytes: [UInt8], contentType: String) throws {
            try lock.withLock {
                writes += 1
                if writes > limit { throw BlobStoreError("stopped") }
            }
            try inner.put(key, bytes, contentType: contentType)
        }
        func get(_ key: String) throws -> [UInt8]? { try inner.get(key) }
        func delete(_ key: String) throws { try inner.delete(key) }
    }

    func testImagesInTheTableMoveToTheStoreAndAStopLosesNothing() throws {
        let ana = try person()
        _ = stories.stop()
        let c = try database.connect()
        var images: [UUID: [UInt8]] = [:]
        for i in 0..<120 {  // as the table held them before the store: bytes and all
            let id = UUID(), bytes = Images.decodablePNG + Array(repeating: UInt8(i), count: 40_000)
            try c.execute("""
                INSERT INTO stories.media (id, owner_id, content_type, bytes, size, sha256) VALUES ($1, $2::uuid, 'image/png', $3, $4, $5)
                """, [id, ana.id, ByteArray(bytes), bytes.count, hexString(sha256(bytes))])
            images[id] = bytes
        }
        let folder = try FileBlobStore(root: try XCTUnwrap(URL(string: TestEnvironment.mediaStore)).path)
        let urls = try MediaURLs(Environment(["MEDIA_URL_KEYS": TestEnvironment.mediaURLKeys]), defaultPort: 1)
        func everyImageIsWhole(_ media: MediaStore) throws {
            for (id, bytes) in images { XCTAssertEqual(try media.bytes(id, on: c), bytes, "image \(id)") }
        }

        // A move stopped in its second batch, after writing some of its objects: the first batch's rows lost their
        // bytes, the second's kept them (and their objects, written already, are written again next time).
        let pool = Pool(url: database.url, maxSize: 1)
        let stopping = MediaStore(schema: "stories", path: "/v1/media", urls: urls, purposes: ["photo"],
                                  store: Failing(folder, failingAfter: 30))
        XCTAssertEqual(try stopping.moveToStore(pool, batch: 20), 20)
        XCTAssertThrowsError(try stopping.moveToStore(pool, batch: 20))
        XCTAssertEqual(try count("media", "bytes IS NULL"), 20)
        try everyImageIsWhole(stopping)

        // The service goes on at its start, and is killed (SIGKILL) while it moves: still nothing is lost.
        stories = try startInstance(ownGroups: true)  // (a killed member would hold up its group's rebalance)
        _ = TestEnvironment.waitUntil(timeout: 30, every: 0.01) { ((try? self.count("media", "bytes IS NULL")) ?? 0) > 20 }
        stories.kill9()
        try everyImageIsWhole(stopping)

        // Started again, it finishes; every image loads by its signed URL, from the store.
        stories = try startInstance(ownGroups: true)  // (a killed member would hold up its group's rebalance)
        api = APIClient(port: stories.port)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 60, every: 0.2) { (try? self.count("media", "bytes IS NOT NULL")) == 0 })
        for (id, bytes) in images {
            XCTAssertEqual(try folder.get("stories/\(id.lowercased)"), bytes)
            let served = try api.get(try signedPath(id.lowercased, port: stories.port))
            XCTAssertEqual(served.status, 200)
            XCTAssertEqual(served.body, bytes)
        }
    }
}
