import Foundation
import XCTest

/// A key pair made with openssl for a stand-in: the private key's PEM (PKCS#8, what the provider gives) and the
/// path of the public half's PEM (what the stand-in verifies with).
struct StandInKey {
    let privatePEM: String
    let publicPath: String

    /// `algorithm`: `EC` (P-256, an APNs `.p8` key) or `RSA` (2048 bits, a service account's key).
    init(_ algorithm: String) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("standin-key-" + UUID().uuidString)
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let key = dir.appendingPathComponent("key.pem").path, pub = dir.appendingPathComponent("public.pem").path
        let options = algorithm == "EC" ? ["-pkeyopt", "ec_paramgen_curve:P-256"] : ["-pkeyopt", "rsa_keygen_bits:2048"]
        try Self.openssl(["genpkey", "-algorithm", algorithm] + options + ["-out", key])
        try Self.openssl(["pkey", "-in", key, "-pubout", "-out", pub])
        privatePEM = try String(contentsOfFile: key, encoding: .utf8)
        publicPath = pub
    }

    /// A certificate for 127.0.0.1 of this key's (an `EC` one), self-signed: the path of its PEM.
    func certificate() throws -> String {
        let dir = URL(fileURLWithPath: publicPath).deletingLastPathComponent()
        let key = dir.appendingPathComponent("key.pem").path, certificate = dir.appendingPathComponent("certificate.pem").path
        try Self.openssl(["req", "-x509", "-key", key, "-out", certificate, "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                          "-days", "2"])
        return certificate
    }

    /// The private key's file.
    var privatePath: String { URL(fileURLWithPath: publicPath).deletingLastPathComponent().appendingPathComponent("key.pem").path }

    private static func openssl(_ arguments: [String]) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        p.arguments = arguments
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw TestFailure("openssl \(arguments.joined(separator: " ")) failed") }
    }
}

/// Apple's push service for a test (deploy/local/apns_standin.py): HTTP/2 over TLS (its own certificate, which
/// notify is told to trust), checking the provider token with the key's public half, and telling what it received.
final class APNsStandIn {
    let port: Int
    let key: StandInKey
    /// The stand-in's TLS certificate (`APNS_CA_FILE`).
    let certificate: String
    let teamId = "TEAM123456", keyId = "KEY1234567"
    /// The apps' bundle ids it accepts.
    let topics = ["tapestry": "com.example.tapestry", "mesajem": "com.example.mesajem", "chat": "com.example.chat"]
    private var process: Process?
    private var input: Pipe?

    init() throws {
        let key = try StandInKey("EC"), tls = try StandInKey("EC")
        let certificate = try tls.certificate()
        let (teamId, keyId, topics) = (teamId, keyId, topics.values.sorted().joined(separator: ","))
        (self.key, self.certificate) = (key, certificate)
        (process, input, port) = try TestEnvironment.startHelper("apns_standin.py") {
            ["--tls", certificate, tls.privatePath, String($0), key.publicPath, teamId, keyId, topics]
        }
    }

    deinit { stop() }

    func stop() {
        try? input?.fileHandleForWriting.close()
        process?.waitUntilExit()
        (process, input) = (nil, nil)
    }

    /// Notify's settings for sending through it (both environments to it: the sandbox host under `/sandbox`).
    var environment: [String: String] {
        ["APNS_URL": "https://127.0.0.1:\(port)", "APNS_SANDBOX_URL": "https://127.0.0.1:\(port)/sandbox", "APNS_CA_FILE": certificate,
         "APNS_TEAM_ID": teamId, "APNS_KEY_ID": keyId,
         "APNS_PRIVATE_KEY": key.privatePEM, "APNS_TOPICS": topics.map { "\($0.key)=\($0.value)" }.sorted().joined(separator: ",")]
    }

    private var client: APIClient { APIClient(port: port) }

    /// A device token as an iPhone has one (32 bytes, hexadecimal).
    static func deviceToken() -> String {
        (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    /// What it received: `notifications`, `refusals`, `connections`, `providerTokens`.
    func received() throws -> [String: Any] { try client.get("/received").json }

    /// The notifications it accepted for `token`.
    func notifications(for token: String) throws -> [[String: Any]] {
        (try received()["notifications"] as? [[String: Any]] ?? []).filter { $0["token"] as? String == token }
    }

    func waitFor(_ count: Int, for token: String, timeout: TimeInterval = 20) throws -> [[String: Any]] {
        _ = try TestEnvironment.waitUntil(timeout: timeout, every: 0.01) { try notifications(for: token).count >= count }
        return try notifications(for: token)
    }

    /// From now on `token` answers 410 Unregistered.
    func forget(_ token: String) throws {
        XCTAssertEqual(try client.post("/_standin/gone", ["token": token]).status, 200)
    }

    /// The provider tokens it saw so far are called expired (403 ExpiredProviderToken), as an hour after their `iat`.
    func expireProviderTokens() throws {
        XCTAssertEqual(try client.post("/_standin/expire").status, 200)
    }

    /// Each answer comes `seconds` late.
    func slow(_ seconds: Double) throws {
        XCTAssertEqual(try client.post("/_standin/slow", ["seconds": seconds]).status, 200)
    }
}

/// Firebase Cloud Messaging and Google's token endpoint for a test (deploy/local/fcm_standin.py): it checks the
/// service account's signed assertion and the messages, and tells what it received.
final class FCMStandIn {
    let port: Int
    let key: StandInKey
    let email = "notify@backend-test.iam.gserviceaccount.com", project = "backend-test"
    private var process: Process?
    private var input: Pipe?

    init() throws {
        let key = try StandInKey("RSA")
        let (email, project) = (email, project)
        self.key = key
        (process, input, port) = try TestEnvironment.startHelper("fcm_standin.py") { [String($0), key.publicPath, email, project] }
    }

    deinit { stop() }

    func stop() {
        try? input?.fileHandleForWriting.close()
        process?.waitUntilExit()
        (process, input) = (nil, nil)
    }

    /// The service account JSON, as Google gives it (its token endpoint this stand-in).
    var serviceAccount: String {
        let account: [String: Any] = ["type": "service_account", "project_id": project, "private_key_id": "k1", "private_key": key.privatePEM,
                                      "client_email": email, "token_uri": "http://127.0.0.1:\(port)/token"]
        return String(decoding: try! JSONSerialization.data(withJSONObject: account, options: [.sortedKeys]), as: UTF8.self)
    }

    /// Notify's settings for sending through it.
    var environment: [String: String] { ["FCM_URL": "http://127.0.0.1:\(port)", "FCM_SERVICE_ACCOUNT": serviceAccount] }

    private var client: APIClient { APIClient(port: port) }

    /// A registration token as an Android app has one.
    static func registrationToken() -> String {
        "d" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased() + ":APA91b" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
    }

    func received() throws -> [String: Any] { try client.get("/received").json }

    /// The messages it accepted for `token` (each `{"message": …}`'s message).
    func messages(for token: String) throws -> [[String: Any]] {
        (try received()["messages"] as? [[String: Any]] ?? []).compactMap { $0["message"] as? [String: Any] }.filter { $0["token"] as? String == token }
    }

    func waitFor(_ count: Int, for token: String, timeout: TimeInterval = 20) throws -> [[String: Any]] {
        _ = try TestEnvironment.waitUntil(timeout: timeout, every: 0.01) { try messages(for: token).count >= count }
        return try messages(for: token)
    }

    func forget(_ token: String) throws {
        XCTAssertEqual(try client.post("/_standin/gone", ["token": token]).status, 200)
    }
}
