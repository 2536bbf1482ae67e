import Foundation
import Models
import Postgres
@testable import DispatchCore
import XCTest

/// A receipt for every payment captured, numbered without gaps within the year, the tax included in the price shown
/// apart; its payer alone sees it.
final class ReceiptTests: PaidDispatchTestCase {
    override var serviceSettings: [String: String] { super.serviceSettings.merging(["TAX_RATE_BASIS_POINTS": "1900"]) { $1 } }

    func testADeliveredCardParcelAndATopUpEachGetAReceipt() throws {
        let sender = try person(), stranger = try person(), courier = try courier(lat: 44.4270, lon: 26.1030)
        let booked = try api.post("/v1/parcels", [
            "pickup": ["lat": 44.4268, "lon": 26.1025, "address": "Piața Universității 1"],
            "dropoff": ["lat": 44.4500, "lon": 26.0900, "address": "Bulevardul Aviatorilor 10"],
            "recipient": ["name": "Rita Recipient"], "service": "express", "paymentMethod": "card", "cardPaymentMethod": "pm_card_visa",
            "documentPhotoMediaId": try photo(sender)], token: sender.token)
        XCTAssertEqual(booked.status, 201, String(decoding: booked.body, as: UTF8.self))
        let parcel = try XCTUnwrap(booked["id"] as? String), price = try XCTUnwrap((booked["quote"] as? [String: Any])?["amountMinor"] as? Int)
        XCTAssertNotNil(wait(parcel, as: courier, for: "offered"))
        XCTAssertEqual(try api.post("/v1/parcels/\(parcel)/accept", token: courier.token).status, 200)
        XCTAssertEqual(try api.post("/v1/parcels/\(parcel)/pickup", token: courier.token).status, 200)
        XCTAssertEqual(try api.post("/v1/parcels/\(parcel)/deliver", ["photoMediaId": try photo(courier)], token: courier.token).status, 200)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 10) {
            ((try? self.api.get("/v1/receipts", token: sender.token))?["items"] as? [Any])?.count == 1
        }, "a receipt once the card is taken")

        let year = Calendar(identifier: .gregorian).dateComponents(in: TimeZone(identifier: "UTC")!, from: Date()).year!
        let receipt = try XCTUnwrap((try api.get("/v1/receipts", token: sender.token)["items"] as? [[String: Any]])?.first)
        XCTAssertEqual(receipt["number"] as? String, "R\(year)-000001")
        XCTAssertEqual(receipt["purpose"] as? String, "parcel")
        XCTAssertEqual(receipt["parcelId"] as? String, parcel)
        XCTAssertEqual(receipt["totalMinor"] as? Int, price)
        let tax = Receipts.taxIncluded(in: price, rateBasisPoints: 1900)
        XCTAssertEqual(tax, Int((Double(price) * 1900 / 11_900).rounded()))
        XCTAssertEqual([receipt["taxMinor"], receipt["netMinor"], receipt["taxRateBasisPoints"]] as? [Int], [tax, price - tax, 1900])
        let lines = receipt["lines"] as? [[String: Any]] ?? []
        XCTAssertEqual(lines.compactMap { $0["amountMinor"] as? Int }.reduce(0, +), price, "the lines add up to what was paid")
        XCTAssertEqual(lines.compactMap { $0["description"] as? String }.map { $0.hasPrefix("Distance, ") ? "Distance" : $0 },
                       ["Base fare", "Distance", "Express"], "the price's parts, by the tariff it was booked with")

        let one = try api.get("/v1/receipts/R\(year)-000001", token: sender.token)
        XCTAssertEqual(one.status, 200)
        XCTAssertEqual(one["paymentId"] as? String, receipt["paymentId"] as? String)
        assertClientError(try api.get("/v1/receipts/R\(year)-000001", token: stranger.token), 404, "another's receipt")
        assertClientError(try api.get("/v1/receipts/nothing", token: sender.token), 404, "no such number")
        XCTAssertEqual((try api.get("/v1/receipts", token: stranger.token)["items"] as? [Any])?.count, 0)

        // A top-up is the year's next receipt.
        let topped = try api.post("/v1/wallet/top-ups", ["amountMinor": 1_000, "cardPaymentMethod": "pm_card_visa"], token: sender.token,
                                  headers: ["Idempotency-Key": UUID().uuidString])
        XCTAssertEqual(topped["status"] as? String, "captured", String(decoding: topped.body, as: UTF8.self))
        let second = try api.get("/v1/receipts/R\(year)-000002", token: sender.token)
        XCTAssertEqual(second.status, 200, String(decoding: second.body, as: UTF8.self))
        XCTAssertEqual([second["totalMinor"], second["taxMinor"], second["netMinor"]] as? [Int], [1_000, 160, 840])
        XCTAssertEqual((second["lines"] as? [[String: Any]])?.first?["description"] as? String, "Wallet top-up")
        XCTAssertThrowsError(try database.connect().execute("UPDATE dispatch.receipts SET total_minor = 0"), "receipts do not change")
        XCTAssertThrowsError(try database.connect().execute("DELETE FROM dispatch.receipts"), "nor go")
        XCTAssertEqual(try database.connect().execute("UPDATE dispatch.receipts SET payer_id = gen_random_uuid() WHERE year = \(year) AND seq = 2"), 1,
                       "an erased payer becomes nobody")
    }

    /// The receipt reaches its payer by mail (HTML and text), at the address they proved, through notify and a real
    /// SMTP server.
    func testTheReceiptOfADeliveredCardParcelIsMailedToItsPayer() throws {
        let mail = try MailServer()
        let notify = try ServiceProcess.startReady("notify", environment: mail.environment.merging([
            "DATABASE_URL": database.url, "AUTH_JWKS_URL": "http://127.0.0.1:\(auth.port)/v1/auth/jwks",
            "KAFKA_GROUP_PREFIX": "t" + UUID().uuidString.prefix(8).lowercased() + "-", "KAFKA_NEW_GROUP_START": "latest",
            "PUBLIC_BASE_URL": "http://127.0.0.1:\(auth.port)", "MAIL_FROM": "no-reply@backend.example",
        ]) { $1 })
        defer {
            if let run = testRun, run.failureCount > 0 { print("--- notify log ---\n\(notify.log.suffix(4000))") }
            notify.stop()
        }
        XCTAssertTrue(consumersAssigned(notify, timeout: 30), "notify's consumer holds its partitions")
        func mails(to name: String, count: Int) throws -> [[String: Any]] {
            var mine: [[String: Any]] = []
            _ = try TestEnvironment.waitUntil(timeout: 20, every: 0.2) {
                mine = try mail.received().filter { ($0["to"] as? String ?? "").contains("\(name)@example.com") }
                return mine.count >= count
            }
            return mine
        }

        // The sender proves their address by the link of the mail that asks them to.
        let name = "rhea" + UUID().uuidString.prefix(8).lowercased()
        let signup = try accounts.signup(name)
        XCTAssertEqual(signup.status, 201)
        let sender = Person(id: signup.userId, token: signup.accessToken), courier = try courier(lat: 44.4270, lon: 26.1030)
        let proof = try XCTUnwrap(try mails(to: name, count: 1).first, "the verification mail")
        let text = proof["text"] as? String ?? ""
        let link = try XCTUnwrap(text.range(of: "https?://[^\\s]+", options: .regularExpression).flatMap { URLComponents(string: String(text[$0])) })
        XCTAssertEqual(try accounts.get(link.path + "?" + (link.percentEncodedQuery ?? "")).status, 200)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) {
            (try? self.database.connect().first("""
                SELECT count(*)::int AS n FROM notify.people WHERE user_id = \(sender.id)::uuid AND email_verified
                """)?["n"] as Int?) == 1
        }, "notify knows the address is proven")

        let booked = try api.post("/v1/parcels", [
            "pickup": ["lat": 44.4268, "lon": 26.1025, "address": "Piața Universității 1"],
            "dropoff": ["lat": 44.4500, "lon": 26.0900, "address": "Bulevardul Aviatorilor 10"],
            "recipient": ["name": "Rita Recipient"], "service": "standard", "insured": true, "paymentMethod": "card",
            "cardPaymentMethod": "pm_card_visa", "documentPhotoMediaId": try photo(sender)], token: sender.token)
        XCTAssertEqual(booked.status, 201, String(decoding: booked.body, as: UTF8.self))
        let parcel = try XCTUnwrap(booked["id"] as? String), price = try XCTUnwrap((booked["quote"] as? [String: Any])?["amountMinor"] as? Int)
        XCTAssertNotNil(wait(parcel, as: courier, for: "offered"))
        XCTAssertEqual(try api.post("/v1/parcels/\(parcel)/accept", token: courier.token).status, 200)
        XCTAssertEqual(try api.post("/v1/parcels/\(parcel)/pickup", token: courier.token).status, 200)
        XCTAssertEqual(try api.post("/v1/parcels/\(parcel)/deliver", ["photoMediaId": try photo(courier)], token: courier.token).status, 200)

        let year = Calendar(identifier: .gregorian).dateComponents(in: TimeZone(identifier: "UTC")!, from: Date()).year!
        let both = try mails(to: name, count: 2)
        let receipt = try XCTUnwrap(both.count == 2 ? both.last : nil, "the receipt's mail")
        XCTAssertEqual(receipt["subject"] as? String, "Your receipt R\(year)-000001")
        XCTAssertEqual(receipt["contentType"] as? String, "multipart/alternative")
        let tax = Receipts.taxIncluded(in: price, rateBasisPoints: 1900)
        func money(_ minor: Int) -> String { "\(minor / 100).\(String(format: "%02d", minor % 100)) EUR" }
        let body = receipt["text"] as? String ?? ""
        XCTAssertTrue(body.contains("Receipt R\(year)-000001"), body)
        XCTAssertTrue(body.contains("Base fare: 3.00 EUR") && body.contains("Insurance: 1.50 EUR"), body)
        XCTAssertTrue(body.contains("Net: \(money(price - tax))"), body)
        XCTAssertTrue(body.contains("Tax (19 %): \(money(tax))"), body)
        XCTAssertTrue(body.contains("Total paid: \(money(price)), tax included."), body)
        let html = receipt["html"] as? String ?? ""
        XCTAssertTrue(html.contains("Receipt R\(year)-000001") && html.contains(money(price)), html)
        Thread.sleep(forTimeInterval: 2)
        XCTAssertEqual(try mail.received().filter { ($0["to"] as? String ?? "").contains("\(name)@example.com") }.count, 2,
                       "one receipt, mailed once")
    }

    /// Tax included, half up: 19 % of a total of 119 is 19; of 1 it is 0; at 0 % nothing.
    func testTheTaxPartIsExact() {
        XCTAssertEqual(Receipts.taxIncluded(in: 119, rateBasisPoints: 1900), 19)
        XCTAssertEqual(Receipts.taxIncluded(in: 1, rateBasisPoints: 1900), 0)
        XCTAssertEqual(Receipts.taxIncluded(in: 1_000, rateBasisPoints: 0), 0)
        XCTAssertEqual(Receipts.taxIncluded(in: 1_000, rateBasisPoints: 1900), 160, "159.66 rounded")
        XCTAssertEqual(Receipts.taxIncluded(in: 10_000, rateBasisPoints: 10_000), 5_000)
    }
}
