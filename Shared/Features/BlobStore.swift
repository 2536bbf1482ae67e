import Crypto
import Foundation
import HTTP
import Runtime

/// Where the bytes of images are kept, out of the database: a folder of files, or a bucket of any S3-compatible
/// object store. Keys are `/`-separated names (`stories/<id>`, `stories/<id>/320`), made by `MediaStore`.
public protocol BlobStore: Sendable {
    /// Writes (or overwrites) `key`; returns once the object is durable.
    func put(_ key: String, _ bytes: [UInt8], contentType: String) throws
    /// The object's bytes, or nil when there is none.
    func get(_ key: String) throws -> [UInt8]?
    /// Removes `key`; no error when it is absent.
    func delete(_ key: String) throws
}

/// Why the store could not do what was asked (never the bytes, nor a credential).
public struct BlobStoreError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// The store `MEDIA_STORE` names: `file:///absolute/path` (a folder, created when missing) or `s3` (a bucket named by
/// `S3_ENDPOINT`, `S3_BUCKET`, `S3_REGION`, `S3_ACCESS_KEY_ID`, `S3_SECRET_ACCESS_KEY`). Required: a service that
/// stores images must be told where, or it would keep them where nobody backs them up.
public enum BlobStores {
    public static func make(_ environment: Environment) throws -> any BlobStore {
        guard let setting = environment.optional("MEDIA_STORE") else {
            throw ConfigError(variable: "MEDIA_STORE", problem: "is required: file:///absolute/path or s3 (with S3_ENDPOINT, S3_BUCKET, ...)")
        }
        if setting == "s3" { return try S3BlobStore(environment) }
        guard setting.hasPrefix("file:///"), let url = URL(string: setting), url.isFileURL, url.query == nil, !url.path.isEmpty else {
            throw ConfigError(variable: "MEDIA_STORE", problem: "must be file:///absolute/path or s3")
        }
        do { return try FileBlobStore(root: url.path) } catch {
            throw ConfigError(variable: "MEDIA_STORE", problem: "names a folder that cannot be created or written (\(url.path))")
        }
    }

    /// Whether `key` is a name both backends keep as given: `/`-separated segments of letters, digits, `-`, `_` and
    /// `.`, none empty, `.` or `..`, so no key reaches outside the folder or the bucket.
    static func isValid(_ key: String) -> Bool {
        guard !key.isEmpty, key.utf8.count <= 512 else { return false }
        return key.split(separator: "/", omittingEmptySubsequences: false).allSatisfy { segment in
            !segment.isEmpty && segment != "." && segment != ".." && segment.utf8.allSatisfy { isPlain($0) && $0 != 0x7E }
        }
    }

    /// A-Z a-z 0-9 - _ . ~: the bytes SigV4's URI-encoding leaves as they are.
    static func isPlain(_ b: UInt8) -> Bool {
        let digit = b >= 0x30 && b <= 0x39, upper = b >= 0x41 && b <= 0x5A, lower = b >= 0x61 && b <= 0x7A
        return digit || upper || lower || b == 0x2D || b == 0x5F || b == 0x2E || b == 0x7E
    }

    static func check(_ key: String) throws {
        guard isValid(key) else { throw BlobStoreError("not a valid object key") }
    }
}

/// Objects as files under `root` (the local stack's store): a key's segments are folders, and its object the file
/// `<last segment>.blob` (so `stories/<id>` and `stories/<id>/320` are a file and a folder side by side; no segment
/// of a key may end in `.blob`). A write goes
/// to a temporary file beside its place, is synced, and is renamed into place (and the folder synced), so a reader
/// never sees half an image and a crash leaves the old one or the new one.
public struct FileBlobStore: BlobStore {
    public let root: String

    public init(root: String) throws {
        self.root = root.hasSuffix("/") && root.count > 1 ? String(root.dropLast()) : root
        try FileManager.default.createDirectory(atPath: self.root, withIntermediateDirectories: true)
        guard access(self.root, W_OK) == 0 else { throw BlobStoreError("\(root) is not writable") }
    }

    func path(_ key: String) throws -> String {
        try BlobStores.check(key)
        guard !key.split(separator: "/").contains(where: { $0.hasSuffix(".blob") }) else { throw BlobStoreError("not a valid object key") }
        return root + "/" + key + ".blob"
    }

    public func put(_ key: String, _ bytes: [UInt8], contentType: String) throws {
        let path = try path(key)
        let folder = (path as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let temporary = folder + "/.tmp-" + hexString(secureRandomBytes(8))
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw BlobStoreError("cannot create a file in \(folder) (errno \(errno))") }
        var written = 0
        let ok = bytes.withUnsafeBytes { raw -> Bool in
            while written < raw.count {
                let n = write(fd, raw.baseAddress! + written, raw.count - written)
                if n < 0 { if errno == EINTR { continue }; return false }
                written += n
            }
            return fsync(fd) == 0
        }
        close(fd)
        guard ok, rename(temporary, path) == 0 else {
            unlink(temporary)
            throw BlobStoreError("cannot write \(key) under \(root) (errno \(errno))")
        }
        let dir = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dir >= 0 { fsync(dir); close(dir) }
    }

    public func get(_ key: String) throws -> [UInt8]? {
        let path = try path(key)
        guard let data = FileManager.default.contents(atPath: path) else {
            if FileManager.default.fileExists(atPath: path) { throw BlobStoreError("cannot read \(key) under \(root)") }
            return nil
        }
        return [UInt8](data)
    }

    public func delete(_ key: String) throws {
        let path = try path(key)
        guard unlink(path) == 0 || errno == ENOENT else { throw BlobStoreError("cannot delete \(key) under \(root) (errno \(errno))") }
    }
}

/// Objects in a bucket of an S3-compatible store (AWS S3, MinIO, Ceph, R2, ...) over the S3 API: PUT, GET and DELETE
/// Object, each signed with AWS Signature Version 4 (header form, the payload's SHA-256 signed too), at path-style
/// URLs `<endpoint>/<bucket>/<key>` (which every S3-compatible store answers, and needs no DNS name per bucket).
public struct S3BlobStore: BlobStore {
    public let endpoint: URL
    public let bucket: String
    public let signer: S3Signer
    /// How long one call may take.
    let timeout: TimeInterval = 30

    public init(endpoint: URL, bucket: String, signer: S3Signer) {
        self.endpoint = endpoint; self.bucket = bucket; self.signer = signer
    }

    /// From `S3_ENDPOINT` (http(s)://host[:port], e.g. `https://s3.eu-central-1.amazonaws.com`), `S3_BUCKET`,
    /// `S3_REGION` (default `us-east-1`), `S3_ACCESS_KEY_ID` and `S3_SECRET_ACCESS_KEY`.
    public init(_ environment: Environment) throws {
        guard let text = environment.optional("S3_ENDPOINT"), let url = URL(string: text), ["http", "https"].contains(url.scheme ?? ""),
              url.host != nil, url.path.isEmpty || url.path == "/", url.query == nil, url.user == nil else {
            throw ConfigError(variable: "S3_ENDPOINT", problem: "must be the store's http(s)://host[:port], without a path (MEDIA_STORE=s3)")
        }
        guard let bucket = environment.optional("S3_BUCKET"), (3...63).contains(bucket.count),
              bucket.utf8.allSatisfy({ BlobStores.isPlain($0) && !($0 >= 0x41 && $0 <= 0x5A) && $0 != 0x5F && $0 != 0x7E }) else {
            throw ConfigError(variable: "S3_BUCKET", problem: "must be a bucket name: 3 to 63 of a-z 0-9 . - (MEDIA_STORE=s3)")
        }
        let region = environment.string("S3_REGION", default: "us-east-1")
        guard (1...64).contains(region.count), region.utf8.allSatisfy({ BlobStores.isPlain($0) && !($0 >= 0x41 && $0 <= 0x5A) && $0 != 0x5F && $0 != 0x2E && $0 != 0x7E }) else {
            throw ConfigError(variable: "S3_REGION", problem: "must be a region name such as eu-central-1")
        }
        guard let key = environment.optional("S3_ACCESS_KEY_ID"), key.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != 0x2F && $0 != 0x2C }) else {
            throw ConfigError(variable: "S3_ACCESS_KEY_ID", problem: "is required with MEDIA_STORE=s3 (printable, no / or ,)")
        }
        guard let secret = environment.optional("S3_SECRET_ACCESS_KEY") else {
            throw ConfigError(variable: "S3_SECRET_ACCESS_KEY", problem: "is required with MEDIA_STORE=s3")
        }
        var base = text
        while base.hasSuffix("/") { base.removeLast() }
        self.init(endpoint: URL(string: base)!, bucket: bucket, signer: S3Signer(accessKeyId: key, secretAccessKey: secret, region: region))
    }

    /// The object's path, `/<bucket>/<key>` (keys hold only characters that need no escaping: `BlobStores.isValid`).
    func path(_ key: String) throws -> String {
        try BlobStores.check(key)
        return "/\(bucket)/\(key)"
    }

    /// Sends one signed request; the status and body, or a `BlobStoreError` when nothing answered.
    func send(_ method: String, _ key: String, body: [UInt8] = [], headers extra: [String: String] = [:]) throws -> (status: Int, body: Data) {
        let path = try path(key)
        let url = URL(string: endpoint.absoluteString + path)!
        var headers = signer.sign(method: method, host: Self.hostHeader(endpoint), path: path, payload: body)
        for (k, v) in extra { headers[k] = v }
        guard let answer = Fetch.send(method, url, headers: headers, body: method == "PUT" ? Data(body) : nil, timeout: timeout,
                                          uncached: true) else {
            throw BlobStoreError("the object store did not answer \(method) \(key) in \(Int(timeout)) s")
        }
        return answer
    }

    /// The `Host` header the client sends for `url`: the port only when it is not the scheme's own.
    static func hostHeader(_ url: URL) -> String {
        let host = url.host!
        guard let port = url.port, !(url.scheme == "http" && port == 80), !(url.scheme == "https" && port == 443) else { return host }
        return "\(host):\(port)"
    }

    /// The store's own error code (`<Code>SignatureDoesNotMatch</Code>`), to say what went wrong without the body.
    static func code(_ body: Data) -> String {
        let text = String(decoding: body.prefix(2048), as: UTF8.self)
        guard let start = text.range(of: "<Code>"), let end = text.range(of: "</Code>", range: start.upperBound..<text.endIndex) else { return "" }
        return " (" + text[start.upperBound..<end.lowerBound].prefix(64) + ")"
    }

    public func put(_ key: String, _ bytes: [UInt8], contentType: String) throws {
        let (status, body) = try send("PUT", key, body: bytes, headers: ["Content-Type": contentType])
        guard (200..<300).contains(status) else { throw BlobStoreError("the object store answered PUT \(key) with \(status)\(Self.code(body))") }
    }

    public func get(_ key: String) throws -> [UInt8]? {
        let (status, body) = try send("GET", key)
        if status == 404 { return nil }
        guard status == 200 else { throw BlobStoreError("the object store answered GET \(key) with \(status)\(Self.code(body))") }
        return [UInt8](body)
    }

    public func delete(_ key: String) throws {
        let (status, body) = try send("DELETE", key)
        guard (200..<300).contains(status) || status == 404 else {
            throw BlobStoreError("the object store answered DELETE \(key) with \(status)\(Self.code(body))")
        }
    }
}

/// AWS Signature Version 4 for S3 in the `Authorization` header, as AWS specifies it: the canonical request (method,
/// URI-encoded path, sorted query, the signed headers lower-cased and sorted with trimmed values, their names, the
/// payload's hex SHA-256), the string to sign over its hash and the scope `<date>/<region>/s3/aws4_request`, and the
/// signing key derived from the secret by HMAC-SHA256 through date, region, service and `aws4_request`.
public struct S3Signer: Sendable {
    public let accessKeyId: String
    let secretAccessKey: String
    public let region: String

    public init(accessKeyId: String, secretAccessKey: String, region: String) {
        self.accessKeyId = accessKeyId; self.secretAccessKey = secretAccessKey; self.region = region
    }

    /// The headers to send for a request without a query: `x-amz-date`, `x-amz-content-sha256` and `Authorization`
    /// (the `Host` header is the client's, signed as `host`). `extra` headers (lower-case names) are signed too.
    public func sign(method: String, host: String, path: String, query: [(String, String)] = [], extra: [(String, String)] = [],
                     payload: [UInt8], now: Date = Date()) -> [String: String] {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        let amzDate = formatter.string(from: now)
        let payloadHash = hexString(sha256(payload))
        let signed = [("host", host), ("x-amz-content-sha256", payloadHash), ("x-amz-date", amzDate)] + extra
        let authorization = self.authorization(method: method, path: path, query: query, headers: signed, payloadHash: payloadHash,
                                               amzDate: amzDate)
        var out = ["x-amz-date": amzDate, "x-amz-content-sha256": payloadHash, "Authorization": authorization]
        for (name, value) in extra { out[name] = value }
        return out
    }

    /// The `Authorization` header's value for the request; `headers` are the signed ones (lower-case names).
    public func authorization(method: String, path: String, query: [(String, String)], headers: [(String, String)],
                              payloadHash: String, amzDate: String) -> String {
        let date = String(amzDate.prefix(8))
        let sorted: [(String, String)] = headers.map { (h: (String, String)) -> (String, String) in (h.0.lowercased(), Self.trim(h.1)) }
            .sorted { (a: (String, String), b: (String, String)) -> Bool in a.0 < b.0 }
        let signedHeaders = sorted.map(\.0).joined(separator: ";")
        let encodedQuery: [(String, String)] = query.map { (Self.encode($0.0, slash: true), Self.encode($0.1, slash: true)) }
        let sortedQuery = encodedQuery.sorted { (a: (String, String), b: (String, String)) -> Bool in a.0 == b.0 ? a.1 < b.1 : a.0 < b.0 }
        let canonicalQuery: String = sortedQuery.map { (p: (String, String)) -> String in p.0 + "=" + p.1 }.joined(separator: "&")
        let canonicalHeaders: String = sorted.map { (h: (String, String)) -> String in h.0 + ":" + h.1 + "\n" }.joined()
        let canonicalRequest: String = [method, Self.encode(path, slash: false), canonicalQuery, canonicalHeaders, signedHeaders,
                                        payloadHash].joined(separator: "\n")
        let scope = "\(date)/\(region)/s3/aws4_request"
        let requestHash: String = hexString(sha256(Array(canonicalRequest.utf8)))
        let stringToSign: String = ["AWS4-HMAC-SHA256", amzDate, scope, requestHash].joined(separator: "\n")
        var key = hmacSHA256(key: Array("AWS4\(secretAccessKey)".utf8), Array(date.utf8))
        for part in [region, "s3", "aws4_request"] { key = hmacSHA256(key: key, Array(part.utf8)) }
        let signature = hexString(hmacSHA256(key: key, Array(stringToSign.utf8)))
        return "AWS4-HMAC-SHA256 Credential=\(accessKeyId)/\(scope), SignedHeaders=\(signedHeaders), Signature=\(signature)"
    }

    /// URI-encoding as SigV4 wants it: every byte but A-Z a-z 0-9 - _ . ~ as %XX (upper-case hex), and `/` too
    /// when `slash` (query names and values), not in a path.
    static func encode(_ s: String, slash: Bool) -> String {
        var out = ""
        for b in s.utf8 {
            let unreserved = BlobStores.isPlain(b) || (!slash && b == 0x2F)
            out += unreserved ? String(UnicodeScalar(b)) : String(format: "%%%02X", b)
        }
        return out
    }

    /// A header value with leading and trailing spaces removed and inner runs of spaces made one.
    static func trim(_ value: String) -> String {
        value.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
    }
}
