import Foundation
import Models
import Payments
import XCTest

/// Cards whose holder must authenticate (3-D Secure, routine under Strong Customer Authentication), against the
/// Stripe stand-in: the booking answers `requires_action` with the intent's client secret, the holder completes it in
/// the app (the stand-in, as Stripe's SDK would), and the signed webhook (or, when it is late, the settler asking
/// Stripe) moves the parcel on; a holder who never does has the parcel called off after the bound.
final class ThreeDSecureTests: PaidDispatchTestCase {
    /// The tests of the bound give the holder 3 s (the settler then asks Stripe itself); the others a minute, so
    /// that only the webhook can have moved their parcels.
    override var serviceSettings: [String: String] {
        super.serviceSettings.merging(["PAYMENT_ACTION_TIMEOUT_SECONDS": name.contains("Bound") ? "3" : "60"]) { $1 }
    }

    let webhookPath = "/v1/payments/stripe/webhook"

    /// Its bookings' card asks for 3-D Secure unless a test names another.
    override var card: String { "pm_card_authenticationRequired" }

    func history(_ parcel: String, _ sender: Person) throws -> [String] {
        (try api.get("/v1/parcels/\(parcel)", token: sender.token)["history"] as? [[String: Any]] ?? []).compactMap { $0["to"] as? String }
    }

    /// A booking whose card needs its holder: 201, waiting for the payment, with what the app needs to ask them.
    func bookNeedingTheHolder(_ sender: Person, key: String? = nil, photo: String? = nil) throws
        -> (response: APIResponse, parcel: String, paymentId: String, clientSecret: String) {
        let booked = try book(sender, key: key, photo: photo)
        XCTAssertEqual(booked.status, 201, String(decoding: booked.body, as: UTF8.self))
        XCTAssertEqual(booked["status"] as? String, "awaiting_payment", "not offered before the card is held")
        let payment = booked["payment"] as? [String: Any] ?? [:]
        XCTAssertEqual(payment["status"] as? String, "requires_action")
        XCTAssertNil(payment["declineCode"])
        XCTAssertNotNil(payment["authenticateBy"] as? String, "the app can say until when")
        let secret = try XCTUnwrap(payment["clientSecret"] as? String, "the app completes the intent with Stripe's SDK")
        let paymentId = try XCTUnwrap(payment["id"] as? String)
        let intent = try XCTUnwrap(try stripe.intents(payment: paymentId).first)
        XCTAssertEqual(intent["client_secret"] as? String, secret, "the intent's own client secret")
        XCTAssertEqual((intent["next_action"] as? [String: Any])?["type"] as? String, "use_stripe_sdk")
        return (booked, booked["id"] as? String ?? "", paymentId, secret)
    }

    func testACardThatNeedsItsHolderIsOfferedOnceTheWebhookSaysTheyAuthenticated() throws {
        try stripe.sendWebhooks(to: "http://127.0.0.1:\(service.port)\(webhookPath)")
        let sender = try person(), courier = try courier(lat: 44.4270, lon: 26.1030)
        let key = UUID().uuidString, photo = try photo(sender)
        let (first, parcel, paymentId, secret) = try bookNeedingTheHolder(sender, key: key, photo: photo)
        // A retried booking is answered exactly as the first was, client secret and all.
        let again = try book(sender, key: key, photo: photo)
        XCTAssertEqual(again.status, 201)
        XCTAssertEqual(String(decoding: again.body, as: UTF8.self), String(decoding: first.body, as: UTF8.self), "byte for byte")
        XCTAssertEqual(again.headers["idempotent-replayed"], "true")
        XCTAssertEqual(try stripe.intents(payment: paymentId).count, 1, "one intent")

        Thread.sleep(forTimeInterval: 0.5)  // five matching rounds
        XCTAssertEqual(try api.get("/v1/parcels/\(parcel)", token: sender.token)["status"] as? String, "awaiting_payment")
        XCTAssertEqual((try api.get("/v1/parcels?role=courier", token: courier.token)["items"] as? [[String: Any]])?.count, 0,
                       "no courier is offered it meanwhile")
        XCTAssertEqual(try ledger(paymentId), [], "nothing held yet")

        XCTAssertEqual(try stripe.authenticate(clientSecret: secret), "requires_capture")
        XCTAssertNotNil(wait(parcel, as: courier, for: "offered", timeout: 15), "the webhook moved it on, well before the settler would have asked")
        let held = try payment(parcel, sender)
        XCTAssertEqual(held["status"] as? String, "authorised")
        XCTAssertNil(held["clientSecret"], "the holder's part is over")
        XCTAssertEqual(try ledger(paymentId), ["authorised"])
        let intent = try XCTUnwrap(try stripe.intents(payment: paymentId).first?["id"] as? String)
        XCTAssertEqual(try stripe.actions(on: intent), ["authorise", "authenticate"])
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 5) {
            (try? self.stripe.webhooks(about: intent).contains { $0.type == "payment_intent.amount_capturable_updated" && $0.status == 200 }) == true
        }, "signed as Stripe signs, and taken")
        let kept: String? = try database.connect().first("SELECT client_secret FROM dispatch.payments WHERE id = $1",
                                                         [UUID(uuidString: paymentId)!])?.decode("client_secret")
        XCTAssertNil(kept, "not kept once it is no longer needed")
        XCTAssertEqual(try history(parcel, sender), ["awaiting_payment", "awaiting_courier", "offered"])

        // Delivered: the hold is taken, as any card's.
        XCTAssertEqual(try api.post("/v1/parcels/\(parcel)/accept", token: courier.token)["status"] as? String, "assigned")
        XCTAssertEqual(try api.post("/v1/parcels/\(parcel)/pickup", token: courier.token)["status"] as? String, "picked_up")
        XCTAssertEqual(try api.post("/v1/parcels/\(parcel)/deliver", ["photoMediaId": try self.photo(courier)], token: courier.token)["status"] as? String,
                       "delivered")
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 10) { (try? self.payment(parcel, sender)["status"] as? String) == "captured" })
        XCTAssertEqual(try ledger(paymentId), ["authorised", "captured"])
    }

    func testAFailedAuthenticationCallsTheBookingOff() throws {
        try stripe.sendWebhooks(to: "http://127.0.0.1:\(service.port)\(webhookPath)")
        let sender = try person()
        let (_, parcel, paymentId, secret) = try bookNeedingTheHolder(sender)
        XCTAssertEqual(try stripe.authenticate(clientSecret: secret, succeed: false), "requires_payment_method")
        XCTAssertNotNil(wait(parcel, as: sender, for: "cancelled", timeout: 15))
        let payment = try payment(parcel, sender)
        XCTAssertEqual(payment["status"] as? String, "declined")
        XCTAssertEqual(payment["declineCode"] as? String, "payment_intent_authentication_failure", "the app can say why")
        XCTAssertNil(payment["clientSecret"])
        XCTAssertEqual(try ledger(paymentId), ["declined"])
        XCTAssertEqual(try history(parcel, sender), ["awaiting_payment", "cancelled"], "never offered")
    }

    func testTheWebhookIsTakenOnlyWithItsSignature() throws {
        let sender = try person()
        let (_, parcel, paymentId, secret) = try bookNeedingTheHolder(sender)
        try stripe.authenticate(clientSecret: secret)  // no webhook is sent: the test sends it
        let intent = try XCTUnwrap(try stripe.intents(payment: paymentId).first)
        XCTAssertEqual(intent["status"] as? String, "requires_capture")
        let event = try stripe.webhook("payment_intent.amount_capturable_updated", intent: intent)
        let forged = StripeWebhookSignature(secret: "whsec_someone_else_entirely").header(body: event.body)
        var tampered = event.body
        tampered[tampered.count - 2] = UInt8(ascii: " ")
        for (body, signature, why) in [(event.body, forged, "another secret"), (event.body, "t=1,v1=" + String(repeating: "0", count: 64), "stale"),
                                       (event.body, "", "none"), (tampered, event.signature, "another body")] {
            let r = try api.send("POST", webhookPath, raw: body, headers: ["Content-Type": "application/json", "Stripe-Signature": signature])
            assertClientError(r, 400, why)
        }
        XCTAssertEqual(try payment(parcel, sender)["status"] as? String, "requires_action", "nothing changed")
        let r = try api.send("POST", webhookPath, raw: event.body, headers: ["Content-Type": "application/json", "Stripe-Signature": event.signature])
        XCTAssertEqual(r.status, 200, String(decoding: r.body, as: UTF8.self))
        XCTAssertEqual(try payment(parcel, sender)["status"] as? String, "authorised")
        XCTAssertEqual(try api.get("/v1/parcels/\(parcel)", token: sender.token)["status"] as? String, "awaiting_courier")
        XCTAssertEqual(try ledger(paymentId), ["authorised"])
    }

    func testAnAuthenticationNeverCompletedIsGivenUpAfterTheBound() throws {
        try stripe.sendWebhooks(to: "http://127.0.0.1:\(service.port)\(webhookPath)")
        let sender = try person()
        let (_, parcel, paymentId, _) = try bookNeedingTheHolder(sender)
        XCTAssertNotNil(wait(parcel, as: sender, for: "cancelled", timeout: 20), "called off once the holder's 3 s are up")
        let payment = try payment(parcel, sender)
        XCTAssertEqual(payment["status"] as? String, "declined")
        XCTAssertEqual(payment["declineCode"] as? String, "authentication_abandoned")
        XCTAssertNil(payment["clientSecret"])
        XCTAssertEqual(try ledger(paymentId), ["declined"])
        XCTAssertEqual(try history(parcel, sender), ["awaiting_payment", "cancelled"])
        let intent = try XCTUnwrap(try stripe.intents(payment: paymentId).first)
        XCTAssertEqual(intent["status"] as? String, "canceled", "the intent is cancelled at Stripe: nobody can complete it any more")
        XCTAssertEqual(try stripe.actions(on: intent["id"] as? String ?? ""), ["authorise", "cancel"])
        let reason: String? = try database.connect().first("SELECT failure_reason FROM dispatch.parcels WHERE id = $1",
                                                           [UUID(uuidString: parcel)!])?.decode("failure_reason")
        XCTAssertEqual(reason, "The payment was not confirmed in time: book again to pay another way or confirm it promptly.")
    }

    func testALateWebhookLeavesItToTheSettlerWithinTheBound() throws {
        // No webhook comes: the settler asks Stripe when the holder's time is up, and finds the card held.
        let sender = try person()
        let (_, parcel, paymentId, secret) = try bookNeedingTheHolder(sender)
        try stripe.authenticate(clientSecret: secret)
        XCTAssertNotNil(wait(parcel, as: sender, for: "awaiting_courier", timeout: 20))
        XCTAssertEqual(try payment(parcel, sender)["status"] as? String, "authorised")
        XCTAssertEqual(try ledger(paymentId), ["authorised"])
        let intent = try XCTUnwrap(try stripe.intents(payment: paymentId).first?["id"] as? String)
        XCTAssertEqual(try stripe.actions(on: intent), ["authorise", "authenticate"], "not cancelled")
    }

    func testAWalletTopUpWhoseCardNeedsItsHolderIsTakenOnceTheyAuthenticate() throws {
        try stripe.sendWebhooks(to: "http://127.0.0.1:\(service.port)\(webhookPath)")
        let sender = try person()
        let topped = try api.post("/v1/wallet/top-ups", ["amountMinor": 1_000, "cardPaymentMethod": "pm_card_authenticationRequired"],
                                  token: sender.token, headers: ["Idempotency-Key": UUID().uuidString])
        XCTAssertEqual(topped.status, 201, String(decoding: topped.body, as: UTF8.self))
        XCTAssertEqual(topped["status"] as? String, "requires_action")
        let secret = try XCTUnwrap(topped["clientSecret"] as? String), id = topped["id"] as? String ?? ""
        try stripe.authenticate(clientSecret: secret)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 15) {
            (try? self.api.get("/v1/wallet/top-ups/\(id)", token: sender.token)["status"] as? String) == "captured"
        }, "held once authenticated, then taken at once")
        XCTAssertEqual(try api.get("/v1/wallet", token: sender.token)["balanceMinor"] as? Int, 1_000)
    }

    /// As the local stack sends them: the stand-in's signed webhooks reach dispatch through the gateway (nginx with
    /// `deploy/gateway`'s configuration, its route table generated from the services' documents).
    func testTheStandInsWebhooksReachDispatchThroughTheGateway() throws {
        let gateway = try Gateway(upstreams: PublicOrigin.names.map { ($0, service.port) }, signInRate: "6000r/m")
        defer { gateway.stop() }
        try stripe.sendWebhooks(to: "http://127.0.0.1:\(gateway.httpPort)\(webhookPath)")
        let sender = try person()
        let (_, parcel, paymentId, secret) = try bookNeedingTheHolder(sender)
        try stripe.authenticate(clientSecret: secret)
        XCTAssertNotNil(wait(parcel, as: sender, for: "awaiting_courier", timeout: 15), gateway.log)
        let intent = try XCTUnwrap(try stripe.intents(payment: paymentId).first?["id"] as? String)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 5) {
            (try? self.stripe.webhooks(about: intent).map(\.status)) == [200, 200]
        }, "requires_action, then amount_capturable_updated: \((try? self.stripe.webhooks(about: intent)) ?? [])")
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 5) {  // (nginx logs a request after its answer)
            gateway.accessLog.filter { $0["path"] as? String == self.webhookPath && $0["upstream"] as? String == "dispatch" }.count == 2
        }, "\(gateway.accessLog.suffix(3))")
    }

    /// `deploy/local/stack load --card-share ... --authentication-share ...`: cards held, half of them after 3-D Secure
    /// completed on the stand-in, each moved on by the stand-in's signed webhooks, and every invariant holding.
    func testADispatchLoadRunPaysByCardThroughThreeDSecureAndWebhooks() throws {
        try stripe.sendWebhooks(to: "http://127.0.0.1:\(service.port)\(webhookPath)")
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("dispatch-load-\(UUID().uuidString.prefix(8))").path
        let load = try ServiceProcess("dispatch-load", environment: [:], arguments: [
            "--dispatch", "http://127.0.0.1:\(service.port)", "--auth", "http://127.0.0.1:\(auth.port)",
            "--operator-token", operatorToken, "--database-url", database.url, "--couriers", "50", "--acting-couriers", "3",
            "--senders", "2", "--fix-rate", "50", "--parcel-rate", "4", "--duration", "3", "--threads", "2", "--out", out,
            "--card-share", "1", "--authentication-share", "0.5", "--provider", "http://127.0.0.1:\(stripe.port)", "--quiet"])
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 120) { !load.process.isRunning }, load.log)
        XCTAssertEqual(load.process.terminationStatus, 0, load.log)
        let report = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: out + ".json"))) as? [String: Any] ?? [:]
        let invariants = report["invariants"] as? [[String: Any]] ?? []
        XCTAssertTrue(invariants.allSatisfy { $0["ok"] as? Bool == true }, "\(invariants)")
        XCTAssertTrue(invariants.contains { $0["name"] as? String == "every webhook the provider sent was taken (provider)" }, "\(invariants)")
        let asked: Int = try database.connect().first("SELECT count(*)::int AS n FROM dispatch.payments WHERE action_expires_at IS NOT NULL")!["n"]
        XCTAssertGreaterThan(asked, 0, "some cards asked their holder")
        let waiting: Int = try database.connect().first("SELECT count(*)::int AS n FROM dispatch.payments WHERE status = 'pending'")!["n"]
        XCTAssertEqual(waiting, 0, "every card held, after its holder authenticated or at once")
    }

    /// A plan's first month asks its holder as a booking does; a renewal, made without them, that needs them after all
    /// does not lapse: it waits for them to come back and confirm it (until the period ends).
    func testAPlanWhoseCardNeedsItsHolderStartsOnceTheyAuthenticateAndARenewalWaitsForThem() throws {
        try stripe.sendWebhooks(to: "http://127.0.0.1:\(service.port)\(webhookPath)")
        let sender = try person()
        let subscribed = try api.post("/v1/plans/subscription", ["planId": "plus", "cardPaymentMethod": "pm_card_authenticationRequired"],
                                      token: sender.token, headers: ["Idempotency-Key": UUID().uuidString])
        XCTAssertEqual(subscribed.status, 201, String(decoding: subscribed.body, as: UTF8.self))
        XCTAssertEqual(subscribed["status"] as? String, "pending")
        let first = try XCTUnwrap(subscribed["clientSecret"] as? String)
        XCTAssertEqual(try api.get("/v1/plans/subscription", token: sender.token)["clientSecret"] as? String, first, "the app can ask again")
        try stripe.authenticate(clientSecret: first)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 15) {
            (try? self.api.get("/v1/plans/subscription", token: sender.token)["status"] as? String) == "active"
        }, "the first month taken once its holder authenticated")
        XCTAssertNil(try api.get("/v1/plans/subscription", token: sender.token)["clientSecret"])

        // The renewal is charged without its holder, and Stripe wants them: the plan does not lapse, it asks them.
        let probe = try EventProbe(topics: ["payment.action_required"])
        let db = try database.connect()
        try db.execute("UPDATE dispatch.subscriptions SET period_end = now() + interval '1 hour'")
        var renewal = ""
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) {
            renewal = (try? self.api.get("/v1/plans/subscription", token: sender.token)["clientSecret"] as? String) ?? ""
            return !renewal.isEmpty
        }, "the renewal waits for its holder")
        let waiting = try api.get("/v1/plans/subscription", token: sender.token)
        XCTAssertEqual(waiting["status"] as? String, "active", "not lapsed")
        XCTAssertGreaterThan(Timestamp.parse(waiting["authenticateBy"] as? String ?? "")?.timeIntervalSinceNow ?? 0, 50 * 60,
                             "until the period ends, not the booking's bound")
        let asked = try XCTUnwrap(probe.first(timeout: 10) { ($0["data"] as? [String: Any])?["userId"] as? String == sender.id }?["data"]
                                  as? [String: Any], "notify is asked to tell them")
        XCTAssertEqual(Timestamp.parse(asked["authenticateBy"] as? String ?? "")?.timeIntervalSince1970 ?? 0,
                       Timestamp.parse(waiting["authenticateBy"] as? String ?? "")?.timeIntervalSince1970 ?? 1, accuracy: 1)
        XCTAssertEqual(asked["amountMinor"] as? Int, 900)
        try stripe.authenticate(clientSecret: renewal)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 15) {
            let s = try? self.api.get("/v1/plans/subscription", token: sender.token)
            return (Timestamp.parse(s?["periodEnd"] as? String ?? "")?.timeIntervalSinceNow ?? 0) > 29 * 86_400
        }, "renewed once its holder confirmed it")
        let entries = try db.rows("SELECT entry FROM dispatch.plan_ledger ORDER BY id").map { try $0["entry"] as String }
        XCTAssertEqual(entries, ["started", "renewed"])
    }
}
