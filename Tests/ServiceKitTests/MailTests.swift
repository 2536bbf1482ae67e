import Foundation
import Mail
import XCTest

/// Sending mail through a real SMTP server (aiosmtpd, smtp_server.py beside this file): STARTTLS required, AUTH over
/// TLS only, every accepted message stored in a Maildir and read back with Python's own MIME parser, as a mail
/// client would.
final class MailTests: XCTestCase {
    var directory: URL!
    var server: Process!
    var input: Pipe!
    var port = 0
    var python = ""
    let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("smtp_server.py").path

    override func setUpWithError() throws {
        let st = try XCTUnwrap(ProcessInfo.processInfo.environment["SCHEMATHESIS_BIN"], "run the tests with deploy/local/stack test")
        python = URL(fileURLWithPath: st).deletingLastPathComponent().appendingPathComponent("python").path
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("mail-" + UUID().uuidString)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // A certificate for 127.0.0.1 the client trusts through caFile, as it would a private CA.
        try run("/usr/bin/openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                                     "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", path("key.pem"), "-out", path("cert.pem")])
        for _ in 0..<5 {
            port = Int.random(in: 20_000...32_000)
            server = Process()
            server.executableURL = URL(fileURLWithPath: python)
            server.arguments = [script, String(port), path("maildir"), path("cert.pem"), path("key.pem"), "mailer", "s3cret-pass"]
            input = Pipe()
            let output = Pipe()
            server.standardInput = input
            server.standardOutput = output
            server.standardError = FileHandle.nullDevice
            try server.run()
            let line = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
            if line.hasPrefix("ready") { return }
            server.terminate()
        }
        XCTFail("the SMTP server did not start")
    }

    override func tearDown() {
        try? input?.fileHandleForWriting.close()
        server?.waitUntilExit()
        try? FileManager.default.removeItem(at: directory)
    }

    func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    @discardableResult
    func run(_ executable: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, "\(executable) \(arguments.first ?? "")")
        return text
    }

    var settings: SMTPSettings {
        SMTPSettings(url: "smtp://127.0.0.1:\(port)", username: "mailer", password: "s3cret-pass", caFile: path("cert.pem"), timeout: 10)
    }

    /// Every message the server stored, as Python's email package reads it.
    func received() throws -> [[String: Any]] {
        let new = directory.appendingPathComponent("maildir/new")
        let files = (try? FileManager.default.contentsOfDirectory(atPath: new.path)) ?? []
        return try files.sorted().map { file in
            let json = try run(python, [script, "--read", new.appendingPathComponent(file).path])
            return try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] ?? [:]
        }
    }

    func message(subject: String = "Your week, woven — Familia Pop") throws -> MailMessage {
        MailMessage(from: try MailAddress("newsletter@tapestry.example", name: "Tapestry"), envelopeFrom: "bounces@tapestry.example",
                    to: try MailAddress("ana@example.com", name: "Ana Ionescu"), subject: subject,
                    text: "Three stories this week.\nSee them all in the app.", html: "<p>Three stories this week: <b>ș, ț, ă</b></p>",
                    messageId: "<newsletter-1@tapestry.example>", unsubscribe: "https://api.example.com/v1/unsubscribe/abc")
    }

    func testAMessageArrivesOverSTARTTLSWithItsPartsAndItsUnsubscribeHeaders() throws {
        let client = try SMTPClient(settings)
        try client.send(try message())
        try client.send(try message(subject: "A second one"))
        let got = try received()
        XCTAssertEqual(got.count, 2)
        let first = try XCTUnwrap(got.first { $0["subject"] as? String == "Your week, woven — Familia Pop" }, "the subject, non-ASCII, decoded")
        XCTAssertEqual(first["from"] as? String, "Tapestry <newsletter@tapestry.example>")
        XCTAssertEqual(first["to"] as? String, "Ana Ionescu <ana@example.com>")
        XCTAssertEqual(first["messageId"] as? String, "<newsletter-1@tapestry.example>")
        XCTAssertEqual(first["contentType"] as? String, "multipart/alternative")
        XCTAssertEqual(first["text"] as? String, "Three stories this week.\nSee them all in the app.")
        XCTAssertEqual(first["html"] as? String, "<p>Three stories this week: <b>ș, ț, ă</b></p>")
        XCTAssertEqual(first["listUnsubscribe"] as? String, "<https://api.example.com/v1/unsubscribe/abc>")
        XCTAssertEqual(first["listUnsubscribePost"] as? String, "List-Unsubscribe=One-Click", "one-click unsubscribe (RFC 8058)")
        XCTAssertEqual(first["mailFrom"] as? String, "bounces@tapestry.example", "bounces go to the envelope sender")
        XCTAssertFalse((first["date"] as? String ?? "").isEmpty)
    }

    func testRefusalsSayWhetherTryingAgainCanHelp() throws {
        // Wrong credentials: permanent. Nobody listening: temporary, at once.
        var wrong = settings
        wrong.password = "not the password"
        XCTAssertThrowsError(try SMTPClient(wrong).send(try message())) { error in
            guard case MailError.permanent(let why) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(why.contains("credentials"), why)
        }
        var nobody = settings
        nobody.url = "smtp://127.0.0.1:9"
        let started = Date()
        XCTAssertThrowsError(try SMTPClient(nobody).send(try message())) { error in
            guard case MailError.temporary = error else { return XCTFail("\(error)") }
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 5)
        // A certificate nobody vouches for: permanent, and nothing (credentials included) was sent.
        var untrusted = settings
        untrusted.caFile = nil
        XCTAssertThrowsError(try SMTPClient(untrusted).send(try message())) { error in
            guard case MailError.permanent(let why) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(why.contains("certificate"), why)
        }
        XCTAssertThrowsError(try SMTPClient(SMTPSettings(url: "http://127.0.0.1:\(port)")))
        XCTAssertEqual(try received().count, 0)
    }

    func testNothingInAMessageCanAddAHeaderOrARecipient() throws {
        let client = try SMTPClient(settings)
        var injected = try message()
        injected.subject = "Hello\r\nBcc: everyone@example.com"
        XCTAssertThrowsError(try client.send(injected)) { XCTAssertEqual($0 as? MailError, .invalid("the subject holds a control character or is too long")) }
        for address in ["ana@example.com>\r\nRCPT TO:<x@example.com", "two@@example.com", "no-domain", "a b@example.com", "<a@example.com>"] {
            XCTAssertThrowsError(try MailAddress(address), address)
        }
        XCTAssertThrowsError(try MailAddress("ana@example.com", name: "Ana\nBcc: x"))
        XCTAssertEqual(try received().count, 0)
    }
}
