import Foundation
import XCTest

/// The mails' links, as a person on a phone meets them (issue 63, point 3): a mail speaks as the app the request came
/// from (`X-Client-Id`: its name, its sender), its link opens a page at the public origin that works without the app
/// (in headless Chromium: a form, no script, a strict CSP), and the gateway serves the association files that make
/// the same links open the app where it is installed.
final class AppLinksTests: XCTestCase {
    var origin: PublicOrigin!
    var mail: MailServer!
    var api: APIClient { origin.api }
    var browser: BrowserDriver?

    /// The gateway's settings (gateway/app-links reads them when it is configured).
    static let gatewaySettings = [
        "APPLE_APP_IDS": "mesajem=ABCDE12345.ro.mesajem.app,tapestry=ABCDE12345.com.example.tapestry,mesajem=ABCDE12345.ro.mesajem.beta",
        "ANDROID_APPS": "mesajem=ro.mesajem.courier@" + Array(repeating: "4F", count: 32).joined(separator: ":"),
        "APP_LINK_PATHS": "mesajem=/t/*",
    ]

    override func setUpWithError() throws {
        // The test harness's gateway is configured with this process's environment.
        for (name, value) in Self.gatewaySettings { setenv(name, value, 1) }
        mail = try MailServer()
        origin = try PublicOrigin(settings: ["notify": mail.environment.merging(["APP_MAIL_FROM": "mesajem=hello@mesajem.example"]) { $1 },
                                             "dispatch": ["FLEET_FEED": "off"]])
    }

    override func tearDown() {
        browser?.stop()
        origin?.stop(failed: (testRun?.failureCount ?? 0) > 0)
        mail = nil
        for name in Self.gatewaySettings.keys { unsetenv(name) }
    }

    /// The mails that reached `username`'s address, once there are `count`.
    func mails(to username: String, count: Int) throws -> [[String: Any]] {
        var mine: [[String: Any]] = []
        _ = try TestEnvironment.waitUntil(timeout: 30, every: 0.2) {
            mine = try mail.received().filter { ($0["to"] as? String ?? "").contains("\(username)@example.com") }
            return mine.count >= count
        }
        return mine
    }

    /// The one link in a mail's text.
    func link(_ letter: [String: Any]?) throws -> String {
        try XCTUnwrap((letter?["text"] as? String)?.firstMatch(of: /http:\/\/[^\s]+/).map { String($0.0) }, "the mail's link")
    }

    func header(_ r: APIResponse, _ name: String) -> String? { r.headers.first { $0.key.lowercased() == name.lowercased() }?.value }

    /// What every page carries: HTML, no script, a strict policy, never framed, cached or told of in a referrer.
    func assertGuardedPage(_ r: APIResponse, status: Int, containing text: String, file: StaticString = #filePath, line: UInt = #line) {
        let body = String(decoding: r.body, as: UTF8.self)
        XCTAssertEqual(r.status, status, body, file: file, line: line)
        XCTAssertEqual(header(r, "Content-Type"), "text/html; charset=utf-8", file: file, line: line)
        XCTAssertTrue(body.contains(text), "\(text) in \(body)", file: file, line: line)
        XCTAssertFalse(body.contains("<script"), file: file, line: line)
        let policy = header(r, "Content-Security-Policy") ?? ""
        for directive in ["default-src 'none'", "form-action 'self'", "frame-ancestors 'none'", "style-src 'sha256-"] {
            XCTAssertTrue(policy.contains(directive), "\(directive) in \(policy)", file: file, line: line)
        }
        XCTAssertFalse(policy.contains("unsafe"), policy, file: file, line: line)
        XCTAssertEqual(header(r, "X-Frame-Options"), "DENY", file: file, line: line)
        XCTAssertEqual(header(r, "Referrer-Policy"), "no-referrer", file: file, line: line)
        XCTAssertEqual(header(r, "Cache-Control"), "no-store", file: file, line: line)
    }

    func testAResetMailOfMesajemOpensAPageInChromiumWhereANewPasswordIsSet() throws {
        let gateway = "http://127.0.0.1:\(origin.gatewayPort)"
        // Lia signs up in Mesajem's iPhone app: the mail proving her address is Mesajem's, and its link proves it.
        let username = "lia" + UUID().uuidString.prefix(6).lowercased()
        let signup = try api.send("POST", "/v1/auth/signup", json: ["username": username, "email": "\(username)@example.com",
                                                                   "password": "correct horse battery", "fullName": "Lia Tester"],
                                  headers: ["X-Client-Id": "mesajem-ios"])
        XCTAssertEqual(signup.status, 201, String(decoding: signup.body, as: UTF8.self))
        let welcome = try XCTUnwrap(try mails(to: username, count: 1).first, "the verification mail")
        XCTAssertEqual(welcome["from"] as? String, "Mesajem <hello@mesajem.example>")
        XCTAssertEqual(welcome["subject"] as? String, "Confirm your e-mail address for Mesajem")
        let proof = try link(welcome)
        XCTAssertTrue(proof.hasPrefix(gateway + "/verify-email?token="), proof)
        XCTAssertTrue(proof.hasSuffix("&app=mesajem"), "the app's universal link matches it: \(proof)")
        assertGuardedPage(try load(proof), status: 200, containing: "Go back to Mesajem")
        XCTAssertEqual(try api.get("/v1/users/me", token: signup.accessToken)["emailVerified"] as? Bool, true)

        // She forgets her password, and asks from the Android app: the reset mail is Mesajem's too.
        let asked = try api.send("POST", "/v1/auth/password-reset", json: ["email": "\(username)@example.com"],
                                 headers: ["X-Client-Id": "mesajem-android"])
        XCTAssertEqual(asked.status, 202, String(decoding: asked.body, as: UTF8.self))
        let letter = try XCTUnwrap(try mails(to: username, count: 2).last, "the reset mail")
        XCTAssertEqual(letter["from"] as? String, "Mesajem <hello@mesajem.example>")
        XCTAssertEqual(letter["subject"] as? String, "Reset your Mesajem password")
        let reset = try link(letter)
        XCTAssertTrue(reset.hasPrefix(gateway + "/reset-password?token="), reset)
        XCTAssertTrue((letter["html"] as? String ?? "").contains(reset.replacingOccurrences(of: "&", with: "&amp;")), "the same link in the HTML part")

        // Opened on a computer (no app): the page, as the gateway serves it; opening it changes nothing.
        assertGuardedPage(try load(reset), status: 200, containing: "Choose a new password")
        browser = try BrowserDriver()
        let chromium = try XCTUnwrap(browser)
        try chromium.open(reset)
        XCTAssertEqual(try chromium.until("document.querySelector('form') && document.querySelector('.app').textContent", timeout: 20) as? String,
                       "Mesajem", "the page speaks as the app")
        // Its one style applies (the policy's hash is the style's): the button is Mesajem's green, #0b7a5a.
        XCTAssertEqual(try chromium.until("document.querySelector('button') && getComputedStyle(document.querySelector('button')).backgroundColor",
                                          timeout: 20) as? String, "rgb(11, 122, 90)")
        XCTAssertEqual(try chromium.eval("document.scripts.length") as? Int, 0)

        // Two passwords that differ: the form again, saying so; nothing changed.
        _ = try chromium.eval("""
            document.getElementById('password').value = 'a brand new secret'; document.getElementById('confirm').value = 'another secret';
            document.querySelector('form').submit(); true
            """)
        XCTAssertEqual(try chromium.until("document.querySelector('.problem') && document.querySelector('.problem').textContent", timeout: 20) as? String,
                       "The two passwords are not the same.")
        // Then the same twice: set.
        _ = try chromium.eval("""
            document.getElementById('password').value = 'a brand new secret'; document.getElementById('confirm').value = 'a brand new secret';
            document.querySelector('form').submit(); true
            """)
        XCTAssertEqual(try chromium.until("document.querySelector('h1') && document.querySelector('h1').textContent === 'Your password is changed' && document.body.innerText",
                                          timeout: 20).map { "\($0)".contains("Sign in with your new password in Mesajem") }, true)

        // The old password fails, the new one works, and the session she had ended.
        XCTAssertEqual(try api.post("/v1/auth/login", ["username": username, "password": "correct horse battery"]).status, 401)
        XCTAssertEqual(try api.post("/v1/auth/login", ["username": username, "password": "a brand new secret"]).status, 200)
        XCTAssertEqual(try api.get("/v1/users/me", token: signup.accessToken).status, 401)

        // The link, opened again, is a page saying it no longer works (in the browser too).
        assertGuardedPage(try load(reset), status: 400, containing: "This link no longer works")
        try chromium.open(reset)
        XCTAssertNotNil(try chromium.until("document.querySelector('h1') && document.querySelector('h1').textContent === 'This link no longer works'", timeout: 20))
    }

    func testTheAssociationFilesNameTheAppsAndThePagesRefuseWhatDoesNotFit() throws {
        // The association files, through the gateway: JSON at the exact paths, no redirect, the configured apps.
        let apple = try api.get("/.well-known/apple-app-site-association")
        XCTAssertEqual(apple.status, 200)
        XCTAssertEqual(header(apple, "Content-Type"), "application/json")
        let details = try XCTUnwrap((apple["applinks"] as? [String: Any])?["details"] as? [[String: Any]], String(decoding: apple.body, as: UTF8.self))
        XCTAssertEqual(details.map { $0["appIDs"] as? [String] ?? [] },
                       [["ABCDE12345.com.example.tapestry"], ["ABCDE12345.ro.mesajem.app", "ABCDE12345.ro.mesajem.beta"]])
        let mesajem = details[1]["components"] as? [[String: Any]] ?? []
        XCTAssertEqual(mesajem.map { $0["/"] as? String ?? "" }, ["/reset-password", "/verify-email", "/t/*"])
        XCTAssertEqual(mesajem.first?["?"] as? [String: String], ["app": "mesajem"], "a link opens the app its mail came from")
        XCTAssertEqual((apple["webcredentials"] as? [String: Any])?["apps"] as? [String],
                       ["ABCDE12345.com.example.tapestry", "ABCDE12345.ro.mesajem.app", "ABCDE12345.ro.mesajem.beta"])
        let android = try api.get("/.well-known/assetlinks.json")
        XCTAssertEqual(android.status, 200)
        XCTAssertEqual(header(android, "Content-Type"), "application/json")
        let statements = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(android.body)) as? [[String: Any]])
        XCTAssertEqual(statements.count, 1)
        XCTAssertEqual(statements.first?["relation"] as? [String], ["delegate_permission/common.handle_all_urls"])
        let target = statements.first?["target"] as? [String: Any]
        XCTAssertEqual(target?["namespace"] as? String, "android_app")
        XCTAssertEqual(target?["package_name"] as? String, "ro.mesajem.courier")
        XCTAssertEqual(target?["sha256_cert_fingerprints"] as? [String], [Array(repeating: "4F", count: 32).joined(separator: ":")])

        // A client id that is not one of the apps' is refused, naming it; none is the backend's own mail.
        let unknown = try api.send("POST", "/v1/auth/password-reset", json: ["email": "x@example.com"], headers: ["X-Client-Id": "pinterest-ios"])
        XCTAssertEqual(unknown.status, 400)
        XCTAssertEqual(unknown.errorField, "X-Client-Id")
        XCTAssertTrue(((unknown["error"] as? [String: Any])?["message"] as? String ?? "").contains("pinterest-ios"), "\(unknown.json)")
        let username = "max" + UUID().uuidString.prefix(6).lowercased()
        XCTAssertEqual(try api.post("/v1/auth/signup", ["username": username, "email": "\(username)@example.com",
                                                        "password": "correct horse battery", "fullName": "Max Tester"]).status, 201)
        XCTAssertEqual(try api.post("/v1/auth/password-reset", ["email": "\(username)@example.com"]).status, 202)
        // (The verification mail of the sign-up may come second: notify sends side by side.)
        let letter = try XCTUnwrap(try mails(to: username, count: 2).first { $0["subject"] as? String != "Confirm your e-mail address" }, "the reset mail")
        XCTAssertEqual(letter["from"] as? String, "no-reply@localhost.localdomain", "MAIL_FROM, as before there were apps")
        XCTAssertEqual(letter["subject"] as? String, "Reset your password")
        let reset = try link(letter)
        XCTAssertFalse(reset.contains("app="), reset)

        // A link that expired, or one nobody sent: a page saying so, not JSON, not a 500.
        let database = try origin.database.connect()
        try database.execute("UPDATE auth.email_tokens SET expires_at = now() - interval '1 second' WHERE purpose = 'reset'")
        assertGuardedPage(try load(reset), status: 400, containing: "This link no longer works")
        assertGuardedPage(try api.get("/reset-password?token=nonsense&app=tapestry"), status: 400, containing: "Tapestry")
        assertGuardedPage(try api.get("/verify-email?token=nonsense"), status: 400, containing: "This link no longer works")
        // The form is read strictly: its own type, its own fields, each once, whole escapes.
        func post(_ body: String, type: String = "application/x-www-form-urlencoded") throws -> APIResponse {
            try api.send("POST", "/reset-password", raw: Array(body.utf8), headers: ["Content-Type": type])
        }
        let token = try XCTUnwrap(URLComponents(string: reset)?.queryItems?.first { $0.name == "token" }?.value)
        assertGuardedPage(try post("token=\(token)&password=a+brand+new+secret&confirm=a+brand+new+secret"), status: 400,
                          containing: "This link no longer works")
        assertGuardedPage(try post("{\"token\":\"\(token)\"}", type: "application/json"), status: 415, containing: "application/x-www-form-urlencoded")
        assertGuardedPage(try post("token=a&token=b"), status: 400, containing: "token is given twice")
        assertGuardedPage(try post("token=a&admin=1"), status: 400, containing: "Unknown field")
        assertGuardedPage(try post("token=%zz"), status: 400, containing: "token is malformed")
        assertGuardedPage(try post("token=a%00b"), status: 400, containing: "token is malformed")
        XCTAssertEqual(try api.post("/v1/auth/login", ["username": username, "password": "correct horse battery"]).status, 200, "nothing changed")
    }
}
