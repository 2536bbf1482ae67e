import Foundation
import Payments
import XCTest

/// Stripe's PaymentIntents API for a test (deploy/local/stripe_standin.py): it holds, takes and releases amounts as
/// Stripe does, keeps idempotency keys as Stripe does, and tells what it did. Webhooks are signed here as Stripe
/// signs them.
final class StripeStandIn {
    let port: Int
    let secretKey = "sk_test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
    let webhookSecret = "whsec_" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
    private var process: Process?
    private var input: Pipe?

    init() throws {
        let key = secretKey
        (process, input, port) = try TestEnvironment.startHelper("stripe_standin.py") { [String($0), key] }
    }

    deinit { stop() }

    func stop() {
        try? input?.fileHandleForWriting.close()
        process?.waitUntilExit()
        (process, input) = (nil, nil)
    }

    /// Dispatch's settings for taking payments through it.
    func environment(timeout: Int = 5) -> [String: String] {
        ["STRIPE_API_URL": "http://127.0.0.1:\(port)", "STRIPE_SECRET_KEY": secretKey, "STRIPE_WEBHOOK_SECRET": webhookSecret,
         "PAYMENT_TIMEOUT_SECONDS": String(timeout)]
    }

    private var client: APIClient { APIClient(port: port) }

    /// The next `times` calls act, then answer only after `seconds`.
    func slow(_ seconds: Double, times: Int = 1) throws {
        XCTAssertEqual(try client.post("/_standin/slow", ["seconds": seconds, "times": times]).status, 200)
    }

    /// Every change of an intent is sent from now on to `url` as a webhook event signed with `webhookSecret`, as
    /// Stripe sends it.
    func sendWebhooks(to url: String) throws {
        XCTAssertEqual(try client.post("/_standin/webhook", ["url": url, "secret": webhookSecret]).status, 200)
    }

    /// The card's holder completes (or fails) 3-D Secure in the app with the intent's client secret, as Stripe's SDK
    /// does: the intent's status after it.
    @discardableResult
    func authenticate(clientSecret: String, succeed: Bool = true) throws -> String? {
        let r = try client.post("/_standin/authenticate", ["client_secret": clientSecret, "outcome": succeed ? "succeed" : "fail"])
        XCTAssertEqual(r.status, 200, String(decoding: r.body, as: UTF8.self))
        return r["status"] as? String
    }

    /// The bank lets `intent`'s hold go (an uncaptured hold lapses after seven days): Stripe cancels it, and a
    /// capture asked after that is refused.
    func lapse(intent: String) throws {
        let r = try client.send("POST", "/v1/payment_intents/\(intent)/cancel", raw: Array("cancellation_reason=automatic".utf8),
                                headers: ["Authorization": "Bearer \(secretKey)", "Content-Type": "application/x-www-form-urlencoded"])
        XCTAssertEqual(r.status, 200, String(decoding: r.body, as: UTF8.self))
    }

    /// The webhooks sent about `intent`: each event's type and the status the endpoint answered (0: none).
    func webhooks(about intent: String) throws -> [(type: String, status: Int)] {
        (try client.get("/_standin/intents")["webhooks"] as? [[Any]] ?? []).filter { $0[1] as? String == intent }.map {
            ($0[0] as? String ?? "", $0[2] as? Int ?? 0)
        }
    }

    /// The intents made for dispatch's payment `paymentId`.
    func intents(payment paymentId: String) throws -> [[String: Any]] {
        (try client.get("/_standin/intents")["intents"] as? [[String: Any]] ?? []).filter {
            ($0["metadata"] as? [String: Any])?["payment_id"] as? String == paymentId
        }
    }

    /// How often each call acted on `intent` (`authorise`, `capture`, `cancel`, `refund`).
    func actions(on intent: String) throws -> [String] {
        (try client.get("/_standin/intents")["actions"] as? [[String]] ?? []).filter { $0.last == intent }.map { $0[0] }
    }

    /// A webhook event about `intent` as Stripe sends it: the body and its `Stripe-Signature`.
    func webhook(_ type: String, intent: [String: Any], id: String = "evt_" + UUID().uuidString.prefix(12).lowercased()) throws -> (body: [UInt8], signature: String) {
        let event: [String: Any] = ["id": id, "object": "event", "type": type, "created": Int(Date().timeIntervalSince1970),
                                    "data": ["object": intent], "livemode": false, "api_version": "2024-06-20"]
        let body = Array(try JSONSerialization.data(withJSONObject: event))
        return (body, StripeWebhookSignature(secret: webhookSecret).header(body: body))
    }
}
