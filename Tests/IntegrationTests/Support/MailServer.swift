import Foundation
import Mail
import XCTest

/// A real SMTP server for a test (aiosmtpd, deploy/local/mail_sink.py): STARTTLS required with a certificate made for
/// the test (trusted through `caFile`, as a private CA would be), AUTH over TLS only for one account, and every
/// message accepted stored in a Maildir, read back with Python's own MIME parser as a mail client would.
final class MailServer {
    let directory: URL
    let user = "mailer", password = "s3cret-pass"
    private(set) var port = 0
    private var process: Process?
    private var input: Pipe?
    private let python: String
    private let script = TestEnvironment.root.appendingPathComponent("deploy/local/mail_sink.py").path

    init() throws {
        python = try TestEnvironment.python()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("mail-" + UUID().uuidString)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try Self.run("/usr/bin/openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                                          "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", path("key.pem"), "-out", path("cert.pem")])
        try start()
    }

    deinit { stop(); try? FileManager.default.removeItem(at: directory) }

    /// Listens (again, after `stop`, on the same port).
    func start() throws {
        let started = try TestEnvironment.startHelper("mail_sink.py", port: port == 0 ? nil : port) { [self] port in
            [String(port), path("maildir"), path("cert.pem"), path("key.pem"), user, password]
        }
        (process, input, port) = (started.process, started.input, started.port)
    }

    /// Stops listening (its standard input closes); what it stored stays.
    func stop() {
        try? input?.fileHandleForWriting.close()
        process?.waitUntilExit()
        (process, input) = (nil, nil)
    }

    func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    var settings: SMTPSettings {
        SMTPSettings(url: "smtp://127.0.0.1:\(port)", username: user, password: password, caFile: path("cert.pem"), timeout: 10)
    }

    /// The settings a service sends through it with.
    var environment: [String: String] {
        ["SMTP_URL": "smtp://127.0.0.1:\(port)", "SMTP_USERNAME": user, "SMTP_PASSWORD": password, "SMTP_CA_FILE": path("cert.pem"),
         "SMTP_TIMEOUT_SECONDS": "10"]
    }

    /// Every message stored, the oldest first, as Python's email package reads it.
    func received() throws -> [[String: Any]] {
        let new = directory.appendingPathComponent("maildir/new")
        let files = (try? FileManager.default.contentsOfDirectory(at: new, includingPropertiesForKeys: [.creationDateKey])) ?? []
        let ordered = files.sorted {
            ((try? $0.resourceValues(forKeys: [.creationDateKey]).creationDate) ?? .distantPast, $0.path)
                < ((try? $1.resourceValues(forKeys: [.creationDateKey]).creationDate) ?? .distantPast, $1.path)
        }
        return try ordered.map { file in
            let json = try Self.run(python, [script, "--read", file.path])
            return try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] ?? [:]
        }
    }

    /// The messages stored once there are at least `count` (all of them), or what there is after `timeout`.
    func waitFor(_ count: Int, timeout: TimeInterval = 20) throws -> [[String: Any]] {
        var got: [[String: Any]] = []
        _ = try TestEnvironment.waitUntil(timeout: timeout, every: 0.2) {
            got = try received()
            return got.count >= count
        }
        return got
    }

    @discardableResult
    static func run(_ executable: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw TestFailure("\(executable) \(arguments.first ?? "") exited \(process.terminationStatus)") }
        return text
    }
}
