import Events
import Foundation
import Models
import Postgres

/// A receipt for every payment captured (a parcel's card, a wallet top-up, a plan's month), issued in the capture's
/// transaction and numbered without gaps within a year (`R2026-000001`): the year's counter row is incremented in
/// that transaction, so a capture rolled back gives its number back, and captures wait for each other only there.
///
/// Prices include the tax (`TAX_RATE_BASIS_POINTS`, 1900 for 19 %): the tax part of a total is
/// total × rate / (10,000 + rate), rounded half up to a whole minor unit, and the net part the rest, so the two
/// always add up to what was paid.
struct Receipts: Sendable {
    let outbox: Outbox
    let taxRateBasisPoints: Int

    /// The tax included in `grossMinor` at `rate` basis points.
    static func taxIncluded(in grossMinor: Int, rateBasisPoints rate: Int) -> Int {
        let denominator = 10_000 + rate
        return (2 * grossMinor * rate + denominator) / (2 * denominator)
    }

    /// The receipt of payment `p`, just captured.
    func issue(_ c: Connection, _ p: PaymentRecord, storage: DispatchStorage) throws {
        let tax = Self.taxIncluded(in: p.amountMinor, rateBasisPoints: taxRateBasisPoints)
        let r = try storage.insertReceipt(c, p, lines: try lines(c, p, storage: storage), taxRateBasisPoints: taxRateBasisPoints, taxMinor: tax)
        try outbox.add(PaymentReceiptIssued(number: r.number, paymentId: r.paymentId, payerId: r.payerId, purpose: r.purpose, parcelId: r.parcelId,
                                            currency: r.currency, totalMinor: r.totalMinor, netMinor: r.netMinor, taxMinor: r.taxMinor,
                                            taxRateBasisPoints: r.taxRateBasisPoints, lines: r.lines, issuedAt: r.issuedAt),
                       subject: r.payerId.lowercased, on: c)
    }

    /// What was paid for, adding up to the amount: a parcel's delivery in its tariff's parts (one line when the tariff
    /// does not explain its price) less the loyalty points spent on it, a top-up, a plan's month.
    private func lines(_ c: Connection, _ p: PaymentRecord, storage: DispatchStorage) throws -> [ReceiptLine] {
        switch p.purpose {
        case .parcel:
            guard let parcel = try p.parcelId.flatMap({ try storage.parcel(c, $0) }) else {
                return [ReceiptLine(description: "Delivery", amountMinor: p.amountMinor)]
            }
            let price = p.amountMinor + parcel.pointsSpent, km = String(format: "%.1f", Double(parcel.quote.distanceMeters) / 1000)
            let tariff = try storage.tariff(c, ofParcel: parcel.id) ?? Tariff()
            var lines = tariff.parts(of: price, meters: parcel.quote.distanceMeters, service: parcel.service, insured: parcel.insured)
                ?? [ReceiptLine(description: "Delivery, \(parcel.service.rawValue)\(parcel.insured ? ", insured" : ""), \(km) km", amountMinor: price)]
            if parcel.pointsSpent > 0 { lines.append(ReceiptLine(description: "Loyalty points", amountMinor: -parcel.pointsSpent)) }
            return lines
        case .topUp:
            return [ReceiptLine(description: "Wallet top-up", amountMinor: p.amountMinor)]
        case .plan:
            let plan = try p.subscriptionId.flatMap { try Plans(outbox: outbox).subscription(c, $0, lock: false) }
                .flatMap { s in Plans.kinds.first { $0.id == s.planId }?.name } ?? "Plan"
            return [ReceiptLine(description: "\(plan), 30 days", amountMinor: p.amountMinor)]
        }
    }
}
