import Foundation
import Models
import XCTest

/// Notifications that reach people: the mails auth asks for, delivered by notify through a real SMTP server (STARTTLS,
/// AUTH), once each, followed by their links as a person would.
final class NotifyTests: XCTestCase {
    var database: TestDatabase!
    var mail: MailServer!
    var auth: ServiceProcess!
    var notify: ServiceProcess!
    var accounts: APIClient { APIClient(port: auth.port) }

    override func setUpWithError() throws {
        database = try TestDatabase()
        mail = try MailServer()
        auth = try ServiceProcess.startReady("auth", environment: ["DATABASE_URL": database.url])
        notify = try ServiceProcess.startReady("notify", environment: mail.environment.merging([
            "DATABASE_URL": database.url, "AUTH_JWKS_URL": "http://127.0.0.1:\(auth.port)/v1/auth/jwks",
            "KAFKA_GROUP_PREFIX": "t" + UUID().uuidString.prefix(8).lowercased() + "-", "KAFKA_NEW_GROUP_START": "latest",
            // The links lead to auth here (a gateway in front in a deployment), and to the apps' reset screen.
            "PUBLIC_BASE_URL": "http://127.0.0.1:\(auth.port)", "PASSWORD_RESET_URL": "https://app.example.com/reset-password",
            "MAIL_FROM": "no-reply@backend.example", "MAIL_FROM_NAME": "Backend",
        ]) { $1 })
        XCTAssertTrue(consumersAssigned(notify, timeout: 30), "notify's consumer holds its partitions")
    }

    override func tearDown() {
        if let notify, (testRun?.failureCount ?? 0) > 0 { print("--- notify log ---\n\(notify.log.suffix(4000))") }
        notify?.stop()
        auth?.stop()
        database?.drop()
        mail = nil
    }

    /// notify tells the person whose plan's renewal their bank wants them to confirm (`payment.action_required`): in
    /// the app's list, with the link to the plan where the app completes it.
    func testARenewalThatNeedsItsHolderBecomesANoticeWithALinkToThePlan() throws {
        let me = try accounts.signup("ana" + UUID().uuidString.prefix(8).lowercased(), password: "correct horse battery")
        let payment = UUID(), subscription = UUID(), by = Date().addingTimeInterval(86_400)
        let event = PaymentActionRequired(paymentId: payment, userId: me.userId.uuid, subscriptionId: subscription, amountMinor: 900,
                                          currency: "EUR", authenticateBy: by, at: Date())
        let id = UUID().uuidString.lowercased()
        try EventProbe.publish(event, subject: me.userId, source: "dispatch", id: id)
        try EventProbe.publish(event, subject: me.userId, source: "dispatch", id: id)  // delivered twice: told once
        let api = APIClient(port: notify.port)
        var items: [[String: Any]] = []
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) {
            items = ((try? api.get("/v1/notifications", token: me.accessToken))?.json["items"] as? [[String: Any]] ?? [])
                .filter { $0["kind"] as? String == "payment_action" }
            return !items.isEmpty
        }, "\(items)")
        let notice = try XCTUnwrap(items.first { $0["channel"] as? String == "app" }, "\(items)")
        XCTAssertEqual(notice["subject"] as? String, "Confirm your plan's renewal")
        XCTAssertEqual(notice["url"] as? String, "/plans/subscription", "where the app completes it")
        XCTAssertEqual(notice["address"] as? String, "mesajem", "Mesajem's")
        // A stale one says nothing: a payment already given up is not worth a notice.
        try EventProbe.publish(PaymentActionRequired(paymentId: UUID(), userId: me.userId.uuid, subscriptionId: nil, amountMinor: 900,
                                                     currency: "EUR", authenticateBy: Date().addingTimeInterval(-60), at: Date()),
                               subject: me.userId, source: "dispatch")
        Thread.sleep(forTimeInterval: 1)
        XCTAssertEqual(((try api.get("/v1/notifications", token: me.accessToken))["items"] as? [[String: Any]] ?? [])
            .filter { $0["kind"] as? String == "payment_action" && $0["channel"] as? String == "app" }.count, 1,
                       "once for the event delivered twice, never for the stale one")
    }

    /// The mails that reached `name`'s address (the run's broker also holds other tests' requests, which a notify
    /// reading its topics from the start delivers too), once there are `count`.
    func mails(to name: String, count: Int) throws -> [[String: Any]] {
        var mine: [[String: Any]] = []
        _ = try TestEnvironment.waitUntil(timeout: 20, every: 0.2) {
            mine = try mail.received().filter { ($0["to"] as? String ?? "").contains("\(name)@example.com") }
            return mine.count >= count
        }
        return mine
    }

    /// The one link in a mail's text.
    func link(_ message: [String: Any]?) -> URLComponents? {
        let text = message?["text"] as? String ?? ""
        guard let range = text.range(of: "https?://[^\\s]+", options: .regularExpression) else { return nil }
        return URLComponents(string: String(text[range]))
    }

    func testSignUpConfirmForgetAndResetByTheMailsThatArriveEachOnce() throws {
        let started = Date().addingTimeInterval(-1)
        let name = "nora" + UUID().uuidString.prefix(8).lowercased()
        let signup = try accounts.signup(name, password: "correct horse battery")
        XCTAssertEqual(signup.status, 201)

        // The verification mail arrives; its link, opened, proves the address.
        let proof = try XCTUnwrap(try mails(to: name, count: 1).first, "the verification mail")
        XCTAssertEqual(proof["subject"] as? String, "Confirm your e-mail address")
        XCTAssertEqual(proof["from"] as? String, "Backend <no-reply@backend.example>")
        XCTAssertEqual(proof["contentType"] as? String, "multipart/alternative")
        XCTAssertTrue((proof["messageId"] as? String ?? "").hasSuffix("@backend.example>"))
        let verify = try XCTUnwrap(link(proof))
        XCTAssertEqual(verify.path, "/verify-email")
        XCTAssertTrue((proof["html"] as? String ?? "").contains(verify.percentEncodedQuery ?? "missing"), "the same link in the HTML part")
        let page = try accounts.get(verify.path + "?" + (verify.percentEncodedQuery ?? ""))
        XCTAssertEqual(page.status, 200, String(decoding: page.body, as: UTF8.self))
        XCTAssertEqual(try accounts.get("/v1/users/me", token: signup.accessToken)["emailVerified"] as? Bool, true)

        // Forgot password: the reset mail's link carries the token the apps' screen sends with the new password.
        XCTAssertEqual(try accounts.post("/v1/auth/password-reset", ["email": "\(name)@example.com"]).status, 202)
        let both = try mails(to: name, count: 2)
        XCTAssertEqual(both.count, 2)
        XCTAssertEqual(both.last?["subject"] as? String, "Reset your password")
        let reset = try XCTUnwrap(link(both.last))
        XCTAssertEqual("\(reset.scheme ?? "")://\(reset.host ?? "")\(reset.path)", "https://app.example.com/reset-password")
        let token = try XCTUnwrap(reset.queryItems?.first { $0.name == "token" }?.value)
        XCTAssertEqual(try accounts.post("/v1/auth/password-reset/confirm", ["token": token, "newPassword": "a brand new secret"]).status, 204)
        XCTAssertEqual(try accounts.get("/v1/users/me", token: signup.accessToken).status, 401, "the old session ended")
        let again = try accounts.post("/v1/auth/login", ["username": name, "password": "a brand new secret"])
        XCTAssertEqual(again.status, 200)

        // What was sent to me, and when; nothing of what the mails said is kept once they went.
        let list = try APIClient(port: notify.port).get("/v1/notifications", token: again.accessToken)
        XCTAssertEqual(list.status, 200, String(decoding: list.body, as: UTF8.self))
        let items = list["items"] as? [[String: Any]] ?? []
        XCTAssertEqual(items.map { $0["kind"] as? String }, ["password_reset", "email_verification"], "the newest first")
        XCTAssertEqual(items.map { $0["status"] as? String }, ["sent", "sent"])
        XCTAssertTrue(items.allSatisfy { $0["sentAt"] is String && $0["updatedAt"] as? String == $0["sentAt"] as? String }, "\(items)")
        let connection = try database.connect()
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) {
            // The in-app list keeps its own notices' text (it shows it); what was mailed or pushed goes once sent.
            (try? connection.first("""
                SELECT count(*)::int AS n FROM notify.deliveries WHERE channel <> 'app' AND (body_text IS NOT NULL OR body_html IS NOT NULL)
                """)?["n"]) == 0
        }, "no token left at rest once the mails went")

        // Every event of auth published again (the operator's republish): nothing is sent twice.
        let republish = try ServiceProcess("auth", environment: ["DATABASE_URL": database.url],
                                           arguments: ["republish", "--since", ISO8601DateFormatter().string(from: started)])
        republish.process.waitUntilExit()
        XCTAssertEqual(republish.process.terminationStatus, 0, republish.log)
        XCTAssertTrue(republish.log.contains("published the events again"), "republish exits once the broker has them")
        // Markers after them in the same partitions (keyed by the same person): once their mails are in, every
        // republished event before them has been read.
        let marker = UUID().uuidString.lowercased(), later = Date().addingTimeInterval(1800)
        try EventProbe.publish(EmailVerificationRequested(userId: marker.uuid, email: "\(name)-marker@example.com", token: "m1", expiresAt: later),
                               subject: signup.userId, source: "auth")
        try EventProbe.publish(PasswordResetRequested(userId: marker.uuid, email: "\(name)-marker@example.com", token: "m2", expiresAt: later),
                               subject: signup.userId, source: "auth")
        _ = try mails(to: name + "-marker", count: 2)
        XCTAssertEqual(try mail.received().filter { ($0["to"] as? String ?? "").contains("\(name)@example.com") }.count, 2, "each mail once")
        XCTAssertEqual(try connection.first("SELECT count(*)::int AS n FROM notify.deliveries WHERE user_id = $1::uuid", [signup.userId])?["n"], 2)
    }
}
