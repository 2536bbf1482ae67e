import Foundation
import Models
import Postgres
@testable import DispatchCore
import XCTest

/// Tariffs and plan prices as data: an operator sets a new tariff from a time not in the past; quotes from then on
/// are priced by it, and a booking that names the tariff of a quote made before keeps that quote's price. A plan's
/// new price is paid by the subscriptions taken from its time on; one taken before renews at its own.
final class TariffTests: PaidDispatchTestCase {

    let route: [String: Any] = ["pickup": ["lat": 44.4268, "lon": 26.1025], "dropoff": ["lat": 44.4500, "lon": 26.0900]]

    func quote(_ sender: Person, service: String = "express", insured: Bool = true) throws -> [String: Any] {
        let r = try api.post("/v1/quotes", route.merging(["service": service, "insured": insured]) { $1 }, token: sender.token)
        XCTAssertEqual(r.status, 200, String(decoding: r.body, as: UTF8.self))
        return r.json
    }

    func book(_ sender: Person, tariff: Any? = nil) throws -> APIResponse {
        var body: [String: Any] = [
            "pickup": ["lat": 44.4268, "lon": 26.1025, "address": "Piața Universității 1"],
            "dropoff": ["lat": 44.4500, "lon": 26.0900, "address": "Bulevardul Aviatorilor 10"],
            "recipient": ["name": "Rita Recipient"], "service": "express", "insured": true, "paymentMethod": "cash",
            "documentPhotoMediaId": try photo(sender)]
        body["tariffId"] = tariff
        return try api.post("/v1/parcels", body, token: sender.token)
    }

    func tariffBody(baseMinor: Int = 500, from: Date) -> [String: Any] {
        ["currency": "EUR", "baseMinor": baseMinor, "perKmMinor": 100, "expressBasisPoints": 17_500, "insuranceMinor": 200,
         "effectiveFrom": Timestamp.format(from), "by": "ops@mesajem.test"]
    }

    /// The tariff a parcel's row says priced it.
    func tariffOf(_ parcel: Any?) throws -> String? {
        try database.connect().first("SELECT tariff_id::text AS t FROM dispatch.parcels WHERE id = \(parcel as? String ?? "")::uuid")?["t"]
    }

    func testANewTariffPricesNewQuotesAndABookingKeepsItsQuotesTariff() throws {
        let sender = try person()

        // The seeded tariff is today's, and prices as the code's default does.
        let listed = try api.get("/v1/operator/tariffs", token: operatorToken)
        XCTAssertEqual(listed.status, 200, String(decoding: listed.body, as: UTF8.self))
        let seeded = try XCTUnwrap(listed["inForce"] as? [String: Any])
        XCTAssertEqual((listed["items"] as? [Any])?.count, 1)
        XCTAssertEqual(seeded["currency"] as? String, "EUR")
        XCTAssertEqual([seeded["baseMinor"], seeded["perKmMinor"], seeded["expressBasisPoints"], seeded["insuranceMinor"]] as? [Int],
                       [300, 80, 15_000, 150])
        let before = try quote(sender)
        let distance = try XCTUnwrap(before["distanceMeters"] as? Int)
        XCTAssertEqual(before["tariffId"] as? String, seeded["id"] as? String)
        XCTAssertEqual(before["amountMinor"] as? Int, Tariff().priceMinor(meters: distance, service: .express, insured: true))
        let validUntil = try XCTUnwrap(Timestamp.parse(before["validUntil"] as? String ?? ""))
        XCTAssertGreaterThan(validUntil, Date().addingTimeInterval(14 * 60), "a quote holds a quarter of an hour")

        // A new tariff six seconds ahead (room for the calls below on a loaded machine): quotes until then keep the old one.
        let from = Date().addingTimeInterval(6)
        let set = try api.post("/v1/operator/tariffs", tariffBody(from: from), token: operatorToken)
        XCTAssertEqual(set.status, 201, String(decoding: set.body, as: UTF8.self))
        XCTAssertEqual(set["createdBy"] as? String, "ops@mesajem.test")
        XCTAssertNotNil(set["createdAt"])
        let newId = try XCTUnwrap(set["id"] as? String)
        XCTAssertEqual(try quote(sender)["amountMinor"] as? Int, before["amountMinor"] as? Int, "not yet in force")
        let scheduled = try api.get("/v1/operator/tariffs", token: operatorToken)
        XCTAssertEqual((scheduled["inForce"] as? [String: Any])?["id"] as? String, seeded["id"] as? String)
        XCTAssertEqual((scheduled["items"] as? [[String: Any]])?.map { $0["id"] as? String }, [newId, seeded["id"] as? String],
                       "the latest effective first")
        XCTAssertLessThan(Date(), from, "the checks above ran before the new tariff's time")

        Thread.sleep(until: from.addingTimeInterval(0.2))
        let after = try quote(sender)
        let new = Tariff(id: nil, currency: "EUR", baseMinor: 500, perKmMinor: 100, expressBasisPoints: 17_500, insuranceMinor: 200,
                         effectiveFrom: from)
        XCTAssertEqual(after["tariffId"] as? String, newId)
        XCTAssertEqual(after["amountMinor"] as? Int, new.priceMinor(meters: distance, service: .express, insured: true))
        XCTAssertNotEqual(after["amountMinor"] as? Int, before["amountMinor"] as? Int)
        XCTAssertEqual((try api.get("/v1/operator/tariffs", token: operatorToken)["inForce"] as? [String: Any])?["id"] as? String, newId)

        // The quote made before keeps its price when booked; a booking naming no quote pays the new price.
        let kept = try book(sender, tariff: before["tariffId"])
        XCTAssertEqual(kept.status, 201, String(decoding: kept.body, as: UTF8.self))
        XCTAssertEqual((kept["quote"] as? [String: Any])?["amountMinor"] as? Int, before["amountMinor"] as? Int)
        XCTAssertEqual(try tariffOf(kept["id"]), seeded["id"] as? String, "the parcel records the tariff it was priced by")
        let fresh = try book(sender)
        XCTAssertEqual(fresh.status, 201, String(decoding: fresh.body, as: UTF8.self))
        XCTAssertEqual((fresh["quote"] as? [String: Any])?["amountMinor"] as? Int, after["amountMinor"] as? Int)
        XCTAssertEqual(try tariffOf(fresh["id"]), newId)
        let unknown = try book(sender, tariff: UUID().uuidString)
        assertClientError(unknown, 400, "a tariff that does not exist")
        XCTAssertEqual(unknown.errorField, "tariffId")

        // A tariff replaced more than a quarter of an hour ago no longer prices a booking.
        try database.connect().execute("""
            INSERT INTO dispatch.tariffs (id, currency, base_minor, per_km_minor, express_basis_points, insurance_minor, effective_from, created_by)
            VALUES (gen_random_uuid(), 'EUR', 400, 90, 15000, 150, now() - interval '1 hour', 'test')
            """)
        Thread.sleep(forTimeInterval: TariffBook.freshFor + 0.2)  // (the other instance's cache)
        let stale = try book(sender, tariff: before["tariffId"])
        assertClientError(stale, 409, "the quote's tariff was replaced an hour ago")
        XCTAssertEqual(stale.errorField, "tariffId")
        XCTAssertEqual(try count("parcels"), 2, "nothing half-written")
    }

    func testTariffsAreNeverRetroactiveAndBadOnesAreRefused() throws {
        let past = try api.post("/v1/operator/tariffs", tariffBody(from: Date().addingTimeInterval(-60)), token: operatorToken)
        assertClientError(past, 400, "effective in the past")
        XCTAssertEqual(past.errorField, "effectiveFrom")

        let from = Date().addingTimeInterval(3600)
        XCTAssertEqual(try api.post("/v1/operator/tariffs", tariffBody(from: from), token: operatorToken).status, 201)
        assertClientError(try api.post("/v1/operator/tariffs", tariffBody(baseMinor: 600, from: from), token: operatorToken), 409,
                          "two tariffs from the same time")

        let good = tariffBody(from: Date().addingTimeInterval(7200))
        for (change, field) in [(["baseMinor": -1], "baseMinor"), (["perKmMinor": -80], "perKmMinor"),
                                (["insuranceMinor": 100_000_000], "insuranceMinor"),
                                (["expressBasisPoints": 9_999], "expressBasisPoints"), (["expressBasisPoints": 1_000_000], "expressBasisPoints"),
                                (["baseMinor": 3.5], "baseMinor"), (["currency": "eur"], "currency"), (["currency": "EURO"], "currency"),
                                (["currency": "USD"], "currency"), (["by": String(repeating: "x", count: 101)], "by"), (["by": ""], "by"),
                                (["effectiveFrom": "tomorrow"], "effectiveFrom"), (["effectiveFrom": NSNull()], "effectiveFrom"),
                                (["surcharge": 5], "surcharge")] as [([String: Any], String)] {
            let r = try api.post("/v1/operator/tariffs", good.merging(change) { $1 }, token: operatorToken)
            assertClientError(r, 400, "\(change)")
            XCTAssertEqual(r.errorField, field, "\(change)")
        }
        assertClientError(try api.send("POST", "/v1/operator/tariffs", raw: Array(String(repeating: "{", count: 100_000).utf8),
                                       token: operatorToken, headers: ["Content-Type": "application/json"]), nil, "an overlong body")

        // Outsiders: no token, a user's token, a wrong operator token.
        let user = try person()
        for token in [nil, user.token, String(repeating: "x", count: 40)] as [String?] {
            for r in [try api.send("GET", "/v1/operator/tariffs", token: token), try api.post("/v1/operator/tariffs", good, token: token)] {
                assertClientError(r, 401, "an outsider")
            }
        }
        XCTAssertEqual(try count("tariffs"), 2, "the seed and the one good tariff")
    }

    func testAPlansNewPriceIsForSubscriptionsTakenFromItsTime() throws {
        let listed = try api.get("/v1/operator/plan-prices", token: operatorToken)
        XCTAssertEqual(listed.status, 200, String(decoding: listed.body, as: UTF8.self))
        XCTAssertEqual(Set((listed["items"] as? [[String: Any]] ?? []).map { "\($0["planId"] ?? "") \($0["priceMinor"] ?? "")" }),
                       ["plus 900", "pro 1900"], "the seeded prices")
        func price(_ plan: String, as who: Person) throws -> Int? {
            (try api.get("/v1/plans", token: who.token)["items"] as? [[String: Any]])?.first { $0["id"] as? String == plan }?["priceMinor"] as? Int
        }
        func subscribe(_ who: Person) throws -> [String: Any] {
            let r = try api.post("/v1/plans/subscription", ["planId": "plus", "cardPaymentMethod": "pm_card_visa"], token: who.token)
            XCTAssertEqual(r.status, 201, String(decoding: r.body, as: UTF8.self))
            XCTAssertEqual(r["status"] as? String, "active")
            return r.json
        }
        func charged(_ who: Person) throws -> [Int] {
            try database.connect().rows("""
                SELECT amount_minor FROM dispatch.payments WHERE purpose = 'plan' AND payer_id = \(who.id)::uuid ORDER BY created_at
                """).map { try $0["amount_minor"] }
        }

        // Both people exist before the new price is set, and its time leaves the early one room to subscribe on a
        // loaded machine (a sign-up alone hashes a password for a second or more).
        let early = try person(), late = try person()
        let from = Date().addingTimeInterval(8)
        let set = try api.post("/v1/operator/plan-prices", ["planId": "plus", "currency": "EUR", "priceMinor": 1_200,
                                                            "effectiveFrom": Timestamp.format(from), "by": "ops"], token: operatorToken)
        XCTAssertEqual(set.status, 201, String(decoding: set.body, as: UTF8.self))
        XCTAssertEqual(try price("plus", as: early), 900, "not yet in force")
        _ = try subscribe(early)
        XCTAssertLessThan(Date(), from, "the early subscription was taken before the new price's time")
        Thread.sleep(until: from.addingTimeInterval(0.2))
        XCTAssertEqual(try price("plus", as: late), 1_200)
        XCTAssertEqual(try price("pro", as: late), 1_900, "another plan's price is its own")
        _ = try subscribe(late)
        XCTAssertEqual(try charged(early), [900])
        XCTAssertEqual(try charged(late), [1_200])

        // The earlier subscriber's renewal costs what their first month did.
        try database.connect().execute("UPDATE dispatch.subscriptions SET period_end = now() + interval '1 hour' WHERE user_id = \(early.id)::uuid")
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) { (try? charged(early).count) == 2 }, "renewed")
        XCTAssertEqual(try charged(early), [900, 900])

        for (change, field) in [(["planId": "gold"], "planId"), (["priceMinor": 10], "priceMinor"), (["currency": "USD"], "currency"),
                                (["effectiveFrom": Timestamp.format(Date().addingTimeInterval(-5))], "effectiveFrom")] as [([String: Any], String)] {
            let body = ["planId": "pro", "currency": "EUR", "priceMinor": 2_500, "effectiveFrom": Timestamp.format(Date().addingTimeInterval(60)),
                        "by": "ops"].merging(change) { $1 }
            let r = try api.post("/v1/operator/plan-prices", body, token: operatorToken)
            assertClientError(r, 400, "\(change)")
            XCTAssertEqual(r.errorField, field, "\(change)")
        }
        assertClientError(try api.get("/v1/operator/plan-prices", token: late.token), 401, "a user")
    }
}
