import Foundation
import XCTest

/// The operations console the gateway serves at `/console`, in headless Chromium (`browser_driver.py`, through the
/// DevTools protocol) against the six services behind the gateway: it loads with the operator's token, shows every
/// service ready, and its map shows couriers and waiting parcels and moves when a courier moves.
final class ConsoleTests: XCTestCase {
    let operatorToken = String(repeating: "c", count: 40)
    var origin: PublicOrigin!
    var api: APIClient { origin.api }

    override func setUpWithError() throws {
        origin = try PublicOrigin(settings: ["dispatch": ["OPERATOR_TOKEN": operatorToken, "DISPATCH_TICK_MS": "100", "FLEET_FEED": "off"]])
    }

    override func tearDown() {
        origin?.stop(failed: (testRun?.failureCount ?? 0) > 0)
    }

    func signUp(_ name: String) throws -> (id: String, token: String) {
        let username = name + String(UUID().uuidString.prefix(6)).lowercased()
        let r = try api.post("/v1/auth/signup", ["username": username, "email": "\(username)@example.com",
                                                 "password": "correct horse battery", "fullName": name.capitalized + " Tester"])
        XCTAssertEqual(r.status, 201, String(decoding: r.body, as: UTF8.self))
        return (r.userId, r.accessToken)
    }

    func book(_ sender: (id: String, token: String), pickup: (Double, Double)) throws -> String {
        let photo = try api.send("POST", "/v1/dispatch/media", raw: Images.jpeg, token: sender.token, headers: ["Content-Type": "image/jpeg"])
        XCTAssertEqual(photo.status, 201)
        let r = try api.post("/v1/parcels", [
            "pickup": ["lat": pickup.0, "lon": pickup.1, "address": "Pickup"], "dropoff": ["lat": 44.45, "lon": 26.09, "address": "Drop-off"],
            "service": "standard", "paymentMethod": "cash", "recipient": ["name": "Rita Recipient"],
            "documentPhotoMediaId": photo["id"]!], token: sender.token)
        XCTAssertEqual(r.status, 201, String(decoding: r.body, as: UTF8.self))
        return r["id"] as? String ?? ""
    }

    func testTheConsoleShowsTheServicesAndAMapThatMovesWithTheCouriers() throws {
        // Without the operator token, the services' metrics are not for anyone; the page itself holds no data.
        XCTAssertEqual(try api.get("/console/services/auth/metrics").status, 401)
        XCTAssertEqual(try api.get("/console/services/auth/metrics", token: String(repeating: "x", count: 40)).status, 401)
        XCTAssertEqual(try api.get("/console/services/postgres/metrics", token: operatorToken).status, 404)
        XCTAssertEqual(try api.get("/console/operator", token: operatorToken).status, 404, "the gateway's own check is internal")
        let page = try api.get("/console")
        XCTAssertEqual(page.status, 200)
        XCTAssertTrue(page.headers["content-security-policy"]?.contains("default-src 'none'") == true)
        let html = String(decoding: page.body, as: UTF8.self)
        XCTAssertFalse(html.contains("src=\"http") || html.contains("href=\"http"), "nothing from elsewhere")

        // Cora is an online courier; another waits far away; a parcel waits where no courier is near.
        let sender = try signUp("sam"), cora = try signUp("cora")
        XCTAssertEqual(try api.post("/v1/couriers/me", ["vehicle": "scooter", "capacity": 3], token: cora.token).status, 201)
        try CourierVetting.approve(api, courier: cora.id, token: cora.token, operatorToken: operatorToken, vehicle: "scooter")
        XCTAssertEqual(try api.send("PUT", "/v1/couriers/me/status", json: ["online": true], token: cora.token).status, 200)
        XCTAssertEqual(try api.send("PUT", "/v1/couriers/me/location", json: ["lat": 44.4270, "lon": 26.1030], token: cora.token).status, 200)
        let idle = UUID().uuidString.lowercased()
        XCTAssertEqual(try api.post("/v1/operator/couriers", ["couriers": [["id": idle, "vehicle": "bike", "capacity": 1, "lat": 44.47, "lon": 26.15]]],
                                    token: operatorToken).status, 200)
        let stranded = try book(sender, pickup: (44.30, 25.90))

        let browser = try BrowserDriver()
        defer { browser.stop() }
        try browser.open("http://127.0.0.1:\(origin.gatewayPort)/console#token=\(operatorToken)")
        let ready = "[...document.querySelectorAll('#services tr[data-service] td:nth-child(2)')].filter(td => td.textContent === 'ready').length"
        let allReady = try browser.until("\(ready) === 6", timeout: 20) as? Bool
        let shown = try browser.eval(ready)
        XCTAssertEqual(allReady, true, "every service shown ready: \(String(describing: shown))")
        XCTAssertNotNil(try browser.until("document.querySelector('[data-courier=\"\(cora.id)\"]') && document.querySelector('[data-courier=\"\(idle)\"]') && document.querySelector('[data-parcel=\"\(stranded)\"]') && location.hash === ''", timeout: 10),
                        "both couriers and the waiting parcel on the map, and the token gone from the address")
        XCTAssertEqual(try browser.eval("document.querySelector('[data-parcel=\"\(stranded)\"]').getAttribute('class')") as? String, "waiting")

        // Cora takes a parcel near her: while she carries it, her fixes are on the event streams, and her dot follows them.
        let parcel = try book(sender, pickup: (44.4268, 26.1025))
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 15, every: 0.2) {
            (try? api.get("/v1/parcels/\(parcel)", token: cora.token)["status"] as? String) == "offered"
        })
        XCTAssertEqual(try api.post("/v1/parcels/\(parcel)/accept", token: cora.token).status, 200)
        let position = "(() => { const c = document.querySelector('[data-courier=\"\(cora.id)\"]'); return c && c.getAttribute('cx') + ',' + c.getAttribute('cy'); })()"
        let before = try XCTUnwrap(try browser.until(position, timeout: 5) as? String)
        let events = try XCTUnwrap(try browser.eval("Number(document.getElementById('events').textContent)") as? Int)
        // Each fix once the page has the event of the one before.
        for step in 1...5 {
            XCTAssertEqual(try api.send("PUT", "/v1/couriers/me/location", json: ["lat": 44.4270 + 0.004 * Double(step), "lon": 26.1030],
                                        token: cora.token).status, 200)
            XCTAssertEqual(try browser.until("Number(document.getElementById('events').textContent) >= \(events + step)", timeout: 8) as? Bool,
                           true, "the position of fix \(step) reached the page")
        }
        let moved = try browser.until("\(position) !== '\(before)' && Number(document.getElementById('events').textContent) >= \(events + 5)", timeout: 8)
        let now = try browser.eval(position) ?? "none"
        XCTAssertEqual(moved as? Bool, true, "Cora's dot moved with the positions the stream carried: \(before) → \(now)")
        let screenshot = FileManager.default.temporaryDirectory.appendingPathComponent("console-\(UUID().uuidString).png")
        defer { try? FileManager.default.removeItem(at: screenshot) }
        try browser.screenshot(screenshot.path)
        XCTAssertGreaterThan((try? Data(contentsOf: screenshot).count) ?? 0, 10_000)

        // A wrong token in the tab: the console asks for the right one and shows nothing.
        let refused = try BrowserDriver()
        defer { refused.stop() }
        try refused.open("http://127.0.0.1:\(origin.gatewayPort)/console#token=\(String(repeating: "x", count: 40))")
        XCTAssertEqual(try refused.until("getComputedStyle(document.getElementById('login')).display === 'block'", timeout: 10) as? Bool, true)
        XCTAssertEqual(try refused.eval("document.querySelectorAll('[data-courier]').length") as? Int, 0)
    }
}

/// `browser_driver.py`: headless Chromium driven through the DevTools protocol, a JSON command and answer a line.
final class BrowserDriver {
    private let process = Process()
    private let input = Pipe(), output = Pipe()
    private var buffer = Data()

    init() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium") else {
            throw TestFailure("Chromium is missing: deploy/local/stack install puts Debian's chromium package in")
        }
        process.executableURL = URL(fileURLWithPath: try TestEnvironment.python())
        process.arguments = [URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("browser_driver.py").path]
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    func send(_ command: [String: Any]) throws -> [String: Any] {
        input.fileHandleForWriting.write(try JSONSerialization.data(withJSONObject: command) + Data("\n".utf8))
        // The driver answers every command, an `until` within its own timeout; an empty read is its end.
        while !buffer.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else { throw TestFailure("browser_driver.py ended without answering \(command)") }
            buffer.append(chunk)
        }
        let end = buffer.firstIndex(of: UInt8(ascii: "\n"))!
        let line = buffer[buffer.startIndex..<end]
        buffer = Data(buffer[buffer.index(after: end)...])
        return try XCTUnwrap(JSONSerialization.jsonObject(with: line) as? [String: Any])
    }

    func open(_ url: String) throws { _ = try send(["open": url]) }
    /// The expression's value once truthy (nil: not within `timeout`).
    func until(_ expression: String, timeout: TimeInterval) throws -> Any? {
        let answer = try send(["until": expression, "timeout": timeout])
        return answer["ok"] as? Bool == true ? answer["value"] : nil
    }
    func eval(_ expression: String) throws -> Any? { try send(["eval": expression])["value"] }
    func screenshot(_ path: String) throws { _ = try send(["screenshot": path]) }

    func stop() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}
