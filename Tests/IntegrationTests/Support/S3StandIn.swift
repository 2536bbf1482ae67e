import Features
import Postgres
import Runtime
import Foundation
import XCTest

/// An S3-compatible object store for a test (deploy/local/s3_standin.py): moto's server, with a bucket and an IAM
/// user allowed S3 whose key signs the requests, and authentication enforced, so a request not signed with that
/// user's secret by AWS Signature Version 4 is refused as AWS refuses it.
final class S3StandIn {
    let port: Int
    let bucket = "media-test"
    let accessKeyId: String
    let secretAccessKey: String
    private var process: Process?
    private var input: Pipe?

    init() throws {
        let python = try TestEnvironment.python(), script = TestEnvironment.root.appendingPathComponent("deploy/local/s3_standin.py").path
        for _ in 0..<5 {
            let port = TestEnvironment.freePort()
            let server = Process()
            server.executableURL = URL(fileURLWithPath: python)
            server.arguments = [script, String(port), bucket]
            let input = Pipe(), output = Pipe()
            server.standardInput = input
            server.standardOutput = output
            server.standardError = FileHandle.nullDevice
            try server.run()
            var line = ""
            while !line.contains("\n") {
                let chunk = output.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                line += String(decoding: chunk, as: UTF8.self)
            }
            let words = line.split(whereSeparator: \.isWhitespace).map(String.init)
            if words.count == 3, words[0] == "ready" {
                (self.port, accessKeyId, secretAccessKey, process, self.input) = (port, words[1], words[2], server, input)
                return
            }
            server.terminate()
        }
        throw TestFailure("s3_standin.py did not start (is moto[server] in the stack's venv?)")
    }

    deinit { stop() }

    func stop() {
        try? input?.fileHandleForWriting.close()
        process?.waitUntilExit()
        (process, input) = (nil, nil)
    }

    /// A service's settings for keeping its images here.
    var environment: [String: String] {
        ["MEDIA_STORE": "s3", "S3_ENDPOINT": "http://127.0.0.1:\(port)", "S3_BUCKET": bucket, "S3_REGION": "us-east-1",
         "S3_ACCESS_KEY_ID": accessKeyId, "S3_SECRET_ACCESS_KEY": secretAccessKey]
    }

    /// Whether the bucket answers that `key` is not there (false when it has it, or does not answer).
    static func absent(_ key: String, in bucket: S3BlobStore) -> Bool {
        do { return try bucket.get(key) == nil } catch { return false }
    }

    /// A client of the bucket, as the services make it from `environment` (or with `secret` instead of the right one).
    func store(secret: String? = nil) throws -> S3BlobStore {
        var settings = environment
        if let secret { settings["S3_SECRET_ACCESS_KEY"] = secret }
        return try S3BlobStore(Environment(settings))
    }
}

extension S3StandIn {
    /// Asserts that nothing of an image is in `database` and all of it is in this bucket: every schema's `media` rows
    /// have no bytes and their image and renditions are objects here, no `media*` table keeps bytes in any column, and
    /// there is no large object. What an S3 variant of a media test checks after it uploaded.
    func assertImagesAreHereOnly(_ database: TestDatabase, file: StaticString = #filePath, line: UInt = #line) throws {
        let c = try database.connect(), bucket = try store()
        let byteColumns = try c.query("""
            SELECT table_schema AS s, table_name AS t, column_name AS c FROM information_schema.columns
            WHERE data_type = 'bytea' AND table_name LIKE 'media%' AND table_schema NOT IN ('pg_catalog', 'information_schema')
            """).rows
        XCTAssertFalse(byteColumns.isEmpty, "the services' media tables (and their former bytes columns)", file: file, line: line)
        for column in byteColumns {
            let (schema, table, name): (String, String, String) = (try column["s"], try column["t"], try column["c"])
            let kept = try c.first("SELECT count(*)::int AS n FROM \(unescaped: schema).\(unescaped: table) WHERE \(unescaped: name) IS NOT NULL")?["n", as: Int.self]
            XCTAssertEqual(kept, 0, "\(schema).\(table).\(name) keeps no image's bytes", file: file, line: line)
            guard table == "media", name == "bytes" else { continue }
            for row in try c.query("SELECT id::text AS id FROM \(unescaped: schema).media").rows {
                let id: String = try row["id"]
                for key in ["\(schema)/\(id)"] + MediaStore.variants.map({ "\(schema)/\(id)/\($0)" }) {
                    XCTAssertNotNil(try bucket.get(key), "\(key) is in the bucket", file: file, line: line)
                }
            }
        }
        XCTAssertEqual(try c.first("SELECT count(*)::int AS n FROM pg_largeobject_metadata")?["n", as: Int.self], 0,
                       "no image as a large object", file: file, line: line)
    }
}
