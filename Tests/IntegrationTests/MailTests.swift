import Foundation
import Mail
import XCTest

/// Sending mail through a real SMTP server (`MailServer`: aiosmtpd with STARTTLS and AUTH), read back as a mail client
/// would.
final class MailTests: XCTestCase {
    var server: MailServer!

    override func setUpWithError() throws { server = try MailServer() }
    override func tearDown() { server = nil }

    func message(subject: String = "Your week, woven — Familia Pop") throws -> MailMessage {
        MailMessage(from: try MailAddress("newsletter@tapestry.example", name: "Tapestry"), envelopeFrom: "bounces@tapestry.example",
                    to: try MailAddress("ana@example.com", name: "Ana Ionescu"), subject: subject,
                    text: "Three stories this week.\nSee them all in the app.", html: "<p>Three stories this week: <b>ș, ț, ă</b></p>",
                    messageId: "<newsletter-1@tapestry.example>", unsubscribe: "https://api.example.com/v1/unsubscribe/abc")
    }

    func testAMessageArrivesOverSTARTTLSWithItsPartsAndItsUnsubscribeHeaders() throws {
        let client = try SMTPClient(server.settings)
        try client.send(try message())
        try client.send(try message(subject: "A second one"))
        let got = try server.received()
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
        var wrong = server.settings
        wrong.password = "not the password"
        XCTAssertThrowsError(try SMTPClient(wrong).send(try message())) { error in
            guard case MailError.permanent(let why) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(why.contains("credentials"), why)
        }
        var nobody = server.settings
        nobody.url = "smtp://127.0.0.1:9"
        let started = Date()
        XCTAssertThrowsError(try SMTPClient(nobody).send(try message())) { error in
            guard case MailError.temporary = error else { return XCTFail("\(error)") }
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 5)
        // A certificate nobody vouches for: permanent, and nothing (credentials included) was sent.
        var untrusted = server.settings
        untrusted.caFile = nil
        XCTAssertThrowsError(try SMTPClient(untrusted).send(try message())) { error in
            guard case MailError.permanent(let why) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(why.contains("certificate"), why)
        }
        XCTAssertThrowsError(try SMTPClient(SMTPSettings(url: "http://127.0.0.1:\(server.port)")))
        XCTAssertEqual(try server.received().count, 0)
    }

    func testNothingInAMessageCanAddAHeaderOrARecipient() throws {
        let client = try SMTPClient(server.settings)
        var injected = try message()
        injected.subject = "Hello\r\nBcc: everyone@example.com"
        XCTAssertThrowsError(try client.send(injected)) { XCTAssertEqual($0 as? MailError, .invalid("the subject holds a control character or is too long")) }
        for address in ["ana@example.com>\r\nRCPT TO:<x@example.com", "two@@example.com", "no-domain", "a b@example.com", "<a@example.com>"] {
            XCTAssertThrowsError(try MailAddress(address), address)
        }
        XCTAssertThrowsError(try MailAddress("ana@example.com", name: "Ana\nBcc: x"))
        XCTAssertEqual(try server.received().count, 0)
    }
}
