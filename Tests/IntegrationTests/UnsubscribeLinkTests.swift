import Foundation
import XCTest

/// A newsletter mail's one-click unsubscribe link (RFC 8058), through the public origin and a real mailbox: it does
/// what it says, and only for the state it was made for: once its reader turned newsletters back on, the link of the
/// old mail no longer turns them off (issue 62); the next mail carries a link that does.
final class UnsubscribeLinkTests: XCTestCase {
    var origin: PublicOrigin!
    var mail: MailServer!
    var api: APIClient { origin.api }

    override func setUpWithError() throws {
        mail = try MailServer()
        origin = try PublicOrigin(settings: ["notify": mail.environment, "stories": ["NEWSLETTER_SCAN_SECONDS": "1"],
                                             "dispatch": ["FLEET_FEED": "off"]])
    }

    override func tearDown() {
        origin?.stop(failed: (testRun?.failureCount ?? 0) > 0)
        mail = nil
    }

    /// The mails that reached `username`'s address, once there are `count`: within a minute, as the first waits on
    /// notify's consumer joining its group, which a busy machine and the local broker can take half of.
    func mails(to username: String, count: Int) throws -> [[String: Any]] {
        var mine: [[String: Any]] = []
        _ = try TestEnvironment.waitUntil(timeout: 60, every: 0.2) {
            mine = try mail.received().filter { ($0["to"] as? String ?? "").contains("\(username)@example.com") }
            return mine.count >= count
        }
        return mine
    }

    /// The path of a mail's `List-Unsubscribe` link on the public origin.
    func unsubscribePath(_ letter: [String: Any]?, file: StaticString = #filePath, line: UInt = #line) throws -> String {
        XCTAssertEqual(letter?["listUnsubscribePost"] as? String, "List-Unsubscribe=One-Click", file: file, line: line)
        let link = try XCTUnwrap((letter?["listUnsubscribe"] as? String)?.trimmingCharacters(in: CharacterSet(charactersIn: "<>")),
                                 file: file, line: line)
        let origin = "http://127.0.0.1:\(self.origin.gatewayPort)"
        XCTAssertTrue(link.hasPrefix(origin + "/v1/notifications/unsubscribe?token="), link, file: file, line: line)
        return String(link.dropFirst(origin.count))
    }

    /// What a mail client's one-click unsubscribe does: the page it answers.
    func oneClick(_ path: String) throws -> String {
        let r = try api.send("POST", path, raw: Array("List-Unsubscribe=One-Click".utf8), headers: ["Content-Type": "application/x-www-form-urlencoded"])
        XCTAssertEqual(r.status, 200, String(decoding: r.body, as: UTF8.self))
        return String(decoding: r.body, as: UTF8.self)
    }

    func newslettersByMail(_ token: String) throws -> Bool? {
        let choices = try api.get("/v1/notifications/preferences", token: token)["items"] as? [[String: Any]] ?? []
        return choices.first { $0["kind"] as? String == "newsletter" && $0["channel"] as? String == "email" }?["enabled"] as? Bool
    }

    func testAnOldMailsLinkNoLongerUnsubscribesOnceNewslettersAreBackOn() throws {
        // Ben proves his address, takes his group's newsletter by mail, and a period closes: the newsletter arrives.
        let username = "ben" + UUID().uuidString.prefix(6).lowercased()
        let signup = try api.post("/v1/auth/signup", ["username": username, "email": "\(username)@example.com",
                                                      "password": "correct horse battery", "fullName": "Ben Tester"])
        XCTAssertEqual(signup.status, 201, String(decoding: signup.body, as: UTF8.self))
        let ben = signup.accessToken
        let welcome = try XCTUnwrap(try mails(to: username, count: 1).first, "the verification mail")
        let proof = try XCTUnwrap((welcome["text"] as? String)?.firstMatch(of: /http:\/\/[^\s]+/).map { String($0.0) }, "its link")
        XCTAssertEqual(try load(proof).status, 200)
        let group = try api.post("/v1/groups", ["name": "Family"], token: ben)["id"] as? String ?? ""
        XCTAssertEqual(try api.post("/v1/stories", ["text": "First snow", "groupIds": [group]], token: ben).status, 201)
        XCTAssertEqual(try api.send("PUT", "/v1/groups/\(group)/newsletter-delivery", json: ["delivery": "email"], token: ben).status, 200)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) {
            let export = try? self.api.get("/v1/users/me/export", token: ben)
            return ((export?["notify"] as? [String: Any])?["address"] as? [String: Any])?["verified"] as? Bool == true
        }, "the notification service knows the address Ben proved")
        let database = try origin.database.connect()
        try database.execute("UPDATE stories.groups SET newsletter_due_at = now() WHERE id = $1::uuid", [group])
        let old = try unsubscribePath(try mails(to: username, count: 2).last)

        // One click unsubscribes him; clicked again while he is unsubscribed, it says so again.
        XCTAssertTrue(try oneClick(old).contains("You are unsubscribed"))
        XCTAssertEqual(try newslettersByMail(ben), false, "unsubscribed in one click")
        XCTAssertTrue(try oneClick(old).contains("You are unsubscribed"))

        // He turns newsletters back on. The old mail's link, clicked (by him, a mail scanner, whoever has the mail),
        // no longer turns them off: it says so, in the page it opens too.
        let on = try api.send("PUT", "/v1/notifications/preferences/newsletter/email", json: ["enabled": true], token: ben)
        XCTAssertEqual(on.status, 200, String(decoding: on.body, as: UTF8.self))
        XCTAssertTrue(try oneClick(old).contains("This link no longer works"))
        XCTAssertEqual(try newslettersByMail(ben), true, "newsletters stay on")
        let page = try api.get(old)
        XCTAssertEqual(page.status, 200)
        XCTAssertTrue(String(decoding: page.body, as: UTF8.self).contains("This link no longer works"))

        // The next newsletter carries a link of its own, which unsubscribes in one click.
        try database.execute("UPDATE stories.groups SET newsletter_due_at = now() WHERE id = $1::uuid", [group])
        let fresh = try unsubscribePath(try mails(to: username, count: 3).last)
        XCTAssertNotEqual(fresh, old)
        XCTAssertTrue(try oneClick(fresh).contains("You are unsubscribed"))
        XCTAssertEqual(try newslettersByMail(ben), false)
    }
}
