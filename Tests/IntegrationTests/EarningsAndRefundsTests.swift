import Foundation
import XCTest

/// Money after the sale, against the Stripe stand-in: a courier's share of each parcel they deliver in their weekly
/// statement and the operator's payouts; refunds by an operator to the card (once, however often asked) or to the
/// wallet, never more than was taken; the day reconciling to zero with both in it.
final class EarningsAndRefundsTests: PaidDispatchTestCase {
    override var paymentTimeout: Int { 3 }

    /// This ISO week's name (UTC), as the statements default to.
    var thisWeek: String {
        var calendar = Calendar(identifier: .iso8601)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents([.yearForWeekOfYear, .weekOfYear], from: Date())
        return String(format: "%04d-W%02d", parts.yearForWeekOfYear!, parts.weekOfYear!)
    }

    /// A card parcel `sender` booked, carried and delivered by `courier`, its card captured: its id and price.
    func deliveredCardParcel(_ sender: Person, by courier: Person) throws -> (id: String, price: Int, paymentId: String) {
        let booked = try api.post("/v1/parcels", [
            "pickup": ["lat": 44.4268, "lon": 26.1025, "address": "Piața Universității 1"],
            "dropoff": ["lat": 44.4500, "lon": 26.0900, "address": "Bulevardul Aviatorilor 10"],
            "recipient": ["name": "Rita Recipient"], "service": "standard", "paymentMethod": "card", "cardPaymentMethod": "pm_card_visa",
            "documentPhotoMediaId": try photo(sender)], token: sender.token)
        XCTAssertEqual(booked.status, 201)
        let parcel = booked["id"] as? String ?? ""
        XCTAssertNotNil(wait(parcel, as: courier, for: "offered"))
        XCTAssertEqual(try api.post("/v1/parcels/\(parcel)/accept", token: courier.token)["status"] as? String, "assigned")
        XCTAssertEqual(try api.post("/v1/parcels/\(parcel)/pickup", token: courier.token)["status"] as? String, "picked_up")
        XCTAssertEqual(try api.post("/v1/parcels/\(parcel)/deliver", ["photoMediaId": try photo(courier)], token: courier.token)["status"] as? String,
                       "delivered")
        var payment: [String: Any] = [:]
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 15) {
            payment = (try? self.api.get("/v1/parcels/\(parcel)", token: sender.token)["payment"] as? [String: Any]) ?? [:]
            return payment["status"] as? String == "captured"
        })
        return (parcel, payment["amountMinor"] as? Int ?? 0, payment["id"] as? String ?? "")
    }

    /// An operator's refund, under `key` (a fresh one unless given; nil: none).
    func refund(_ parcel: String, _ body: [String: Any], key: String? = UUID().uuidString) throws -> APIResponse {
        try api.post("/v1/operator/parcels/\(parcel)/refunds", body, token: operatorToken, headers: key.map { ["Idempotency-Key": $0] } ?? [:])
    }

    func testADeliveredParcelEarnsItsCourierTheirShareOnceInTheirWeeklyStatementAndThePayouts() throws {
        let sender = try person(), courier = try courier(lat: 44.4270, lon: 26.1030)
        let (parcel, price, _) = try deliveredCardParcel(sender, by: courier)
        let share = price * 75 / 100

        let statement = try api.get("/v1/couriers/me/earnings", token: courier.token)
        XCTAssertEqual(statement.status, 200, String(decoding: statement.body, as: UTF8.self))
        XCTAssertEqual(statement["week"] as? String, thisWeek)
        XCTAssertEqual(statement["currency"] as? String, "EUR", "the tariff's")
        let items = statement["items"] as? [[String: Any]] ?? []
        XCTAssertEqual(items.map { $0["parcelId"] as? String }, [parcel])
        XCTAssertEqual(items.first?["priceMinor"] as? Int, price)
        XCTAssertEqual(items.first?["shareMinor"] as? Int, share, "75% of the price, rounded down")
        XCTAssertNotNil(items.first?["deliveredAt"] as? String)
        XCTAssertEqual(statement["totalMinor"] as? Int, share)
        XCTAssertEqual(try api.get("/v1/couriers/me/earnings?week=\(thisWeek)", token: courier.token)["totalMinor"] as? Int, share)
        let past = try api.get("/v1/couriers/me/earnings?week=2020-W53", token: courier.token)
        XCTAssertEqual((past["items"] as? [[String: Any]])?.count, 0, "a week with nothing delivered (2020 has a W53)")
        XCTAssertEqual(past["totalMinor"] as? Int, 0)

        // Once per parcel: the ledger's key refuses a second entry.
        XCTAssertThrowsError(try database.connect().execute("""
            INSERT INTO dispatch.courier_earnings (parcel_id, courier_id, price_minor, share_percent, amount_minor, currency)
            VALUES ($1, $2, 1, 75, 0, 'EUR')
            """, [parcel, courier.id]))

        // The operator pays what the statements say.
        let payouts = try api.get("/v1/operator/payouts?week=\(thisWeek)", token: operatorToken)
        XCTAssertEqual(payouts.status, 200, String(decoding: payouts.body, as: UTF8.self))
        let mine = (payouts["items"] as? [[String: Any]])?.first { $0["courierId"] as? String == courier.id }
        XCTAssertEqual(mine?["totalMinor"] as? Int, share)
        XCTAssertEqual(mine?["parcels"] as? Int, 1)
        let ledgerTotal: Int = try database.connect().first("SELECT coalesce(sum(amount_minor), 0)::int AS n FROM dispatch.courier_earnings")!["n"]
        XCTAssertEqual((payouts["totals"] as? [[String: Any]])?.compactMap { $0["totalMinor"] as? Int }.reduce(0, +), ledgerTotal,
                       "the payouts sum to the earnings in the ledger")
        XCTAssertEqual((payouts["items"] as? [[String: Any]])?.compactMap { $0["totalMinor"] as? Int }.reduce(0, +), ledgerTotal)

        assertClientError(try api.get("/v1/couriers/me/earnings", token: sender.token), 404, "not a courier")
        for bad in ["2026-49", "2026-W54", "2026-W00", "2021-W53", "2026-w49", "26-W01", "2026-W4"] {
            assertClientError(try api.get("/v1/couriers/me/earnings?week=\(bad)", token: courier.token), 400, bad)
            assertClientError(try api.get("/v1/operator/payouts?week=\(bad)", token: operatorToken), 400, bad)
        }
        assertClientError(try api.get("/v1/operator/payouts", token: courier.token), 401, "operators only")
    }

    func testAnOperatorRefundsPartToTheCardOnceThenTheRestToTheWalletAndNoMore() throws {
        let sender = try person(), courier = try courier(lat: 44.4270, lon: 26.1030)
        let (parcel, price, paymentId) = try deliveredCardParcel(sender, by: courier)
        let share = price * 75 / 100
        let intent = try XCTUnwrap(try stripe.intents(payment: paymentId).first?["id"] as? String)

        // Part to the card, asked twice under one key: refunded once.
        let key = UUID().uuidString
        let first = try refund(parcel, ["amountMinor": 100, "reason": "Arrived a day late", "to": "card"], key: key)
        XCTAssertEqual(first.status, 201, String(decoding: first.body, as: UTF8.self))
        XCTAssertEqual(first["status"] as? String, "refunded", "the provider answered in time")
        XCTAssertEqual(first["to"] as? String, "card")
        XCTAssertEqual(first["amountMinor"] as? Int, 100)
        let again = try refund(parcel, ["amountMinor": 100, "reason": "Arrived a day late", "to": "card"], key: key)
        XCTAssertEqual(again.body, first.body, "a retry is answered as the first request")
        XCTAssertEqual(try stripe.actions(on: intent), ["authorise", "capture", "refund"], "refunded once")

        // The rest to the wallet; then nothing is left.
        let rest = try refund(parcel, ["amountMinor": price - 100, "reason": "Damaged box", "to": "wallet"])
        XCTAssertEqual(rest.status, 201, String(decoding: rest.body, as: UTF8.self))
        XCTAssertEqual(rest["status"] as? String, "refunded")
        XCTAssertEqual(try api.get("/v1/wallet", token: sender.token)["balanceMinor"] as? Int, price - 100)
        let over = try refund(parcel, ["amountMinor": 1, "reason": "More", "to": "wallet"])
        assertClientError(over, 409, "nothing left to refund")
        XCTAssertEqual(try ledger(paymentId), ["authorised", "captured", "refunded", "refunded"])
        let sums: Int = try database.connect().first("""
            SELECT sum(amount_minor)::int AS n FROM dispatch.payment_ledger WHERE payment_id = $1 AND entry = 'refunded'
            """, [paymentId])!["n"]
        XCTAssertEqual(sums, price, "refunded in all: what was captured")

        // Each refund an event; the wallet's also told as a wallet entry.
        let told = try events(["payment.refunded", "wallet.recorded"], count: 3) { event in
            event.data("paymentId") as? String == paymentId
        }
        let refunded = told.filter { $0["type"] as? String == "payment.refunded" }
        XCTAssertEqual(refunded.compactMap { $0.data("to") as? String }, ["card", "wallet"])
        XCTAssertEqual(refunded.compactMap { $0.data("amountMinor") as? Int }, [100, price - 100])
        XCTAssertEqual(refunded.compactMap { $0.data("refundedMinor") as? Int }, [100, price])
        XCTAssertEqual(refunded.compactMap { $0.data("reason") as? String }, ["Arrived a day late", "Damaged box"])
        XCTAssertTrue((refunded.first?.data("providerReference") as? String)?.hasPrefix("re_") == true)
        let wallet = told.filter { $0["type"] as? String == "wallet.recorded" }
        XCTAssertEqual(wallet.compactMap { $0.data("entry") as? String }, ["returned"])
        XCTAssertEqual(wallet.first?.data("refundId") as? String, rest["id"] as? String)

        // The day reconciles: the delivery was paid for; what was taken went back, and to the courier.
        let day = try api.get("/v1/operator/payments/reconciliation", token: operatorToken)
        XCTAssertEqual(day.status, 200, String(decoding: day.body, as: UTF8.self))
        let money = (day["money"] as? [[String: Any]])?.first { $0["currency"] as? String == "EUR" }
        XCTAssertEqual(money?["takenMinor"] as? Int, price)
        XCTAssertEqual(money?["refundedToCardMinor"] as? Int, 100)
        XCTAssertEqual(money?["refundedToWalletMinor"] as? Int, price - 100)
        XCTAssertEqual(money?["courierEarningsMinor"] as? Int, share)
        XCTAssertEqual(money?["keptMinor"] as? Int, -share, "all refunded: the business paid the courier's share itself")
        XCTAssertEqual(day["differenceMinor"] as? Int, 0, "the day reconciles")

        // What cannot be refunded, and bad input.
        let cashSender = try person()
        let cash = try send(cashSender, to: nil)
        let cashParcel = cash["id"] as? String ?? "", cashPrice = (cash["quote"] as? [String: Any])?["amountMinor"] as? Int ?? 0
        assertClientError(try refund(cashParcel, ["amountMinor": 1, "reason": "Early", "to": "wallet"]), 409, "not delivered yet")
        XCTAssertNotNil(wait(cashParcel, as: courier, for: "offered"))
        _ = try api.post("/v1/parcels/\(cashParcel)/accept", token: courier.token)
        _ = try api.post("/v1/parcels/\(cashParcel)/pickup", token: courier.token)
        XCTAssertEqual(try api.post("/v1/parcels/\(cashParcel)/deliver", ["photoMediaId": try photo(courier), "cashCollectedMinor": cashPrice],
                                    token: courier.token)["status"] as? String, "delivered")
        let toCard = try refund(cashParcel, ["amountMinor": 1, "reason": "Late", "to": "card"])
        assertClientError(toCard, 409, "cash cannot go back to a card")
        XCTAssertTrue(String(decoding: toCard.body, as: UTF8.self).contains("cash"), "it says why")
        XCTAssertEqual(try refund(cashParcel, ["amountMinor": cashPrice, "reason": "Late", "to": "wallet"])["status"] as? String, "refunded",
                       "cash goes back to the wallet")
        assertClientError(try refund(UUID().uuidString.lowercased(), ["amountMinor": 1, "reason": "Late", "to": "wallet"]), 404, "no such parcel")
        assertClientError(try api.post("/v1/operator/parcels/\(parcel)/refunds", ["amountMinor": 1, "reason": "x", "to": "wallet"],
                                       token: sender.token), 401, "operators only")
        for (body, why) in [(["amountMinor": -5, "reason": "Late", "to": "card"], "a negative amount"),
                            (["amountMinor": 0, "reason": "Late", "to": "card"], "nothing"),
                            (["amountMinor": 5, "to": "card"], "no reason"),
                            (["amountMinor": 5, "reason": "   ", "to": "card"], "a blank reason"),
                            (["amountMinor": 5, "reason": "Late", "to": "cash"], "an unknown destination"),
                            (["amountMinor": 5, "reason": "Late"], "no destination"),
                            (["amountMinor": "5", "reason": "Late", "to": "card"], "an amount as text")] as [([String: Any], String)] {
            assertClientError(try refund(parcel, body), 400, why)
        }
        // A retry without a key could not be told from a second refund.
        assertClientError(try refund(parcel, ["amountMinor": 5, "reason": "Late", "to": "wallet"], key: nil), 400, "no Idempotency-Key")
        let rows: Int = try database.connect().first("SELECT count(*)::int AS n FROM dispatch.refunds")!["n"]
        XCTAssertEqual(rows, 3, "refused refunds leave nothing behind")
    }

    /// A refund whose answer came too late stays pending, is asked again under the same key, and is made once.
    func testARefundWhoseAnswerCameTooLateIsAskedAgainAndMadeOnce() throws {
        let sender = try person(), courier = try courier(lat: 44.4270, lon: 26.1030)
        let (parcel, price, paymentId) = try deliveredCardParcel(sender, by: courier)
        let intent = try XCTUnwrap(try stripe.intents(payment: paymentId).first?["id"] as? String)
        try stripe.slow(7)
        let r = try refund(parcel, ["amountMinor": price, "reason": "Never arrived", "to": "card"])
        XCTAssertEqual(r.status, 201)
        XCTAssertEqual(r["status"] as? String, "pending", "the provider acted but its answer came too late")
        let id = r["id"] as? String ?? ""
        assertClientError(try refund(parcel, ["amountMinor": 1, "reason": "More", "to": "wallet"]), 409, "a pending refund counts")
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 30) {
            (try? self.database.connect().first("SELECT status FROM dispatch.refunds WHERE id = $1", [id])?["status"] as String?) == "refunded"
        })
        XCTAssertEqual(try stripe.actions(on: intent), ["authorise", "capture", "refund"], "refunded once")
        XCTAssertEqual(try ledger(paymentId), ["authorised", "captured", "refunded"])
    }
}
