import Foundation
import XCTest

/// A Web Push service for a test (deploy/local/push_endpoint.py): it makes subscriptions as a browser would, checks
/// each message's VAPID signature, audience, TTL and encoding as a push service does, and decrypts its payload with
/// the subscription's private key as the browser would. What reached a subscription is read back decrypted.
final class PushEndpoint {
    /// A VAPID private key for the tests' notify (deploy/local/stack vapid-key made it).
    static let testKey = "Ik9mYiuhUl5_jhitakPObkV0FLfyGMAuITqT2fBInzM"

    let port: Int
    private var process: Process?
    private var input: Pipe?

    init() throws {
        (process, input, port) = try TestEnvironment.startHelper("push_endpoint.py") { [String($0)] }
    }

    deinit { stop() }

    func stop() {
        try? input?.fileHandleForWriting.close()
        process?.waitUntilExit()
        (process, input) = (nil, nil)
    }

    private var client: APIClient { APIClient(port: port) }

    /// A new subscription for `applicationServerKey`, as `PushManager.subscribe` gives it (`toJSON()`); `answer` is
    /// what its endpoint answers every message with (201 takes them).
    func subscribe(applicationServerKey: String, answer: Int = 201, retryAfter: Int? = nil) throws -> [String: Any] {
        var options: [String: Any] = ["applicationServerKey": applicationServerKey, "answer": answer]
        if let retryAfter { options["retryAfter"] = retryAfter }
        let r = try client.post("/subscriptions", options)
        guard r.status == 201 else { throw TestFailure("the push endpoint made no subscription: \(r.status)") }
        return r.json
    }

    /// Makes the endpoint answer each message only after `delay` seconds (a slow push service).
    func slow(_ endpoint: Any?, delay: Double) throws {
        let id = (endpoint as? String ?? "").split(separator: "/").last.map(String.init) ?? ""
        XCTAssertEqual(try client.send("PATCH", "/subscriptions/" + id, json: ["delay": delay]).status, 204)
    }

    /// What reached the subscription at `endpoint`, decrypted: `payload`, `ttl`, `urgency`, `topic`, `receivedAt`.
    func messages(_ endpoint: Any?) throws -> [[String: Any]] {
        let id = (endpoint as? String ?? "").split(separator: "/").last.map(String.init) ?? ""
        let r = try client.get("/messages/" + id)
        return (try? JSONSerialization.jsonObject(with: Data(r.body))) as? [[String: Any]] ?? []
    }

    /// The messages once there are at least `count`, or what there is after `timeout`.
    func waitFor(_ count: Int, at endpoint: Any?, timeout: TimeInterval = 20) throws -> [[String: Any]] {
        var got: [[String: Any]] = []
        _ = try TestEnvironment.waitUntil(timeout: timeout, every: 0.1) {
            got = try messages(endpoint)
            return got.count >= count
        }
        return got
    }

    /// How many messages it refused (a bad signature, audience or encoding), and why.
    func refusals() throws -> (count: Int, reasons: [String]) {
        let stats = try client.get("/stats").json
        return (stats["refused"] as? Int ?? -1, stats["reasons"] as? [String] ?? [])
    }
}
