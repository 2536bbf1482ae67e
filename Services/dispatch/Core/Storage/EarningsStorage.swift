import Foundation
import Models
import Postgres

/// One parcel a courier delivered and their share of it.
struct EarningRecord: PostgresRecord {
    let parcelId: UUID
    let courierId: UUID
    let priceMinor: Int
    let amountMinor: Int
    let currency: String
    let at: Date

    init(_ r: Row) throws {
        parcelId = try r["parcel_id"]; courierId = try r["courier_id"]; priceMinor = try r["price_minor"]
        amountMinor = try r["amount_minor"]; currency = try r["currency"]; at = try r["at"]
    }

    static let columns: SQL = "parcel_id, courier_id, price_minor, amount_minor, currency, at"
}

/// What one courier earned in a week in one currency: what to pay them.
struct PayoutRow {
    let courierId: UUID
    let currency: String
    let parcels: Int
    let totalMinor: Int
}

/// A day's money in one currency: what was taken (or is due) for the day's deliveries, and where it went: the refunds
/// made that day, the couriers' earnings of those deliveries and what the business keeps. Whether each delivery was
/// paid for is the delivery rows' to say; this row repeats nothing of theirs, so the day's difference counts a
/// shortfall once.
struct MoneyRow {
    let currency: String
    let takenMinor: Int
    let refundedToCardMinor: Int
    let refundedToWalletMinor: Int
    let courierEarningsMinor: Int
    var refundedMinor: Int { refundedToCardMinor + refundedToWalletMinor }
    /// What was taken less the refunds and the couriers' earnings: negative when the business paid out more than it
    /// took (a delivery refunded whole, or one never paid for, still earns its courier their share).
    var keptMinor: Int { takenMinor - refundedMinor - courierEarningsMinor }
}

extension DispatchStorage {
    /// `courier`'s earnings from `start` to `end`, in `currency`, the oldest first.
    func earnings(_ c: Connection, courier: UUID, currency: String, from start: Date, to end: Date) throws -> [EarningRecord] {
        try c.all(EarningRecord.self, """
            SELECT \(EarningRecord.columns) FROM dispatch.courier_earnings
            WHERE courier_id = \(courier) AND currency = \(currency) AND at >= \(start) AND at < \(end) ORDER BY at, parcel_id
            """)
    }

    /// Each courier's earnings from `start` to `end`, per currency.
    func payouts(_ c: Connection, from start: Date, to end: Date) throws -> [PayoutRow] {
        try c.rows("""
            SELECT courier_id, currency, count(*)::int AS parcels, sum(amount_minor)::int AS total FROM dispatch.courier_earnings
            WHERE at >= \(start) AND at < \(end) GROUP BY courier_id, currency ORDER BY currency, courier_id
            """).map { r in
            PayoutRow(courierId: try r["courier_id"], currency: try r["currency"], parcels: try r["parcels"], totalMinor: try r["total"])
        }
    }

    /// The couriers' earnings and the refunds of `day` (UTC), per currency, set against `taken` (what the day's
    /// deliveries took or are due, per currency).
    func moneyOn(_ c: Connection, day: String, taken: [String: Int]) throws -> [MoneyRow] {
        var rows: [String: MoneyRow] = [:]
        for r in try c.rows("""
            SELECT currency, sum(earned)::int AS earned, sum(card)::int AS card, sum(wallet)::int AS wallet
            FROM (SELECT currency, amount_minor AS earned, 0 AS card, 0 AS wallet
                  FROM dispatch.courier_earnings WHERE at >= \(day)::date AND at < \(day)::date + 1
                  UNION ALL
                  SELECT l.currency, 0, CASE WHEN r.destination = 'card' THEN l.amount_minor ELSE 0 END,
                      CASE WHEN r.destination = 'wallet' THEN l.amount_minor ELSE 0 END
                  FROM dispatch.payment_ledger l JOIN dispatch.refunds r ON r.id = l.refund_id
                  WHERE l.entry = 'refunded' AND l.at >= \(day)::date AND l.at < \(day)::date + 1) day
            GROUP BY currency
            """) {
            let currency: String = try r["currency"], card: Int = try r["card"], wallet: Int = try r["wallet"]
            rows[currency] = MoneyRow(currency: currency, takenMinor: taken[currency] ?? 0, refundedToCardMinor: card,
                                      refundedToWalletMinor: wallet, courierEarningsMinor: try r["earned"])
        }
        for (currency, amount) in taken where rows[currency] == nil {
            rows[currency] = MoneyRow(currency: currency, takenMinor: amount, refundedToCardMinor: 0, refundedToWalletMinor: 0,
                                      courierEarningsMinor: 0)
        }
        return rows.values.sorted { $0.currency < $1.currency }
    }
}

extension DispatchStorage {
    /// What `payment`'s refunds came to (with those still being asked of the provider, when `pendingToo`).
    func refundedMinor(_ c: Connection, payment: UUID, pendingToo: Bool) throws -> Int {
        try c.first("""
            SELECT coalesce(sum(amount_minor), 0)::int AS refunded FROM dispatch.refunds
            WHERE payment_id = \(payment) AND (status = 'refunded' OR (\(pendingToo)::boolean AND status = 'pending'))
            """)!["refunded"]
    }

    /// A refund of `payment`: done at once when `dueIn` is nil (the wallet's), else pending, asked after `dueIn` seconds.
    func insertRefund(_ c: Connection, id: UUID, payment: PaymentRecord, _ new: NewRefund, dueIn: TimeInterval?) throws -> RefundRecord {
        try c.one(RefundRecord.self, """
            INSERT INTO dispatch.refunds (id, payment_id, parcel_id, payer_id, destination, amount_minor, currency, reason, status, due_at)
            VALUES (\(id), \(payment.id), \(new.parcel), \(payment.payerId), \(new.to.rawValue), \(new.amountMinor), \(payment.currency),
                \(new.reason), \(dueIn == nil ? "refunded" : "pending"),
                CASE WHEN \(dueIn)::float8 IS NULL THEN NULL ELSE now() + make_interval(secs => \(dueIn)) END)
            RETURNING \(RefundRecord.columns)
            """)!
    }

    func refund(_ c: Connection, _ id: UUID, lock: Bool) throws -> RefundRecord? {
        try c.one(RefundRecord.self, "SELECT \(RefundRecord.columns) FROM dispatch.refunds WHERE id = \(id)\(unescaped: lock ? " FOR UPDATE" : "")")
    }

    /// A refund's end: `refunded` or `failed`.
    func saveRefund(_ c: Connection, _ id: UUID, status: RefundStatus, providerRefund: String?, failure: String?) throws -> RefundRecord {
        try c.one(RefundRecord.self, """
            UPDATE dispatch.refunds SET status = \(status), provider_refund = \(providerRefund), failure = \(failure), due_at = NULL,
                updated_at = now()
            WHERE id = \(id) RETURNING \(RefundRecord.columns)
            """)!
    }

    /// A refund the provider did not answer: asked again in `seconds`.
    func retryRefund(_ c: Connection, _ id: UUID, in seconds: TimeInterval) throws {
        try c.execute("UPDATE dispatch.refunds SET due_at = now() + make_interval(secs => \(seconds)), updated_at = now() WHERE id = \(id)")
    }

    /// Leases up to `limit` pending card refunds whose call is due (or `only`, whatever its due time), with the
    /// provider's id of the payment each refunds, as `leaseDuePayments` leases payments.
    func leaseDueRefunds(_ c: Connection, only: UUID?, limit: Int, lease: TimeInterval) throws -> [(RefundRecord, String)] {
        let leased = try c.all(RefundRecord.self, """
            UPDATE dispatch.refunds SET due_at = now() + make_interval(secs => \(lease)), attempts = attempts + 1
            WHERE id IN (SELECT id FROM dispatch.refunds
                         WHERE status = 'pending' AND (CASE WHEN \(only)::uuid IS NULL THEN due_at <= now() ELSE id = \(only) END)
                         ORDER BY due_at LIMIT \(limit) FOR UPDATE SKIP LOCKED)
            RETURNING \(RefundRecord.columns)
            """)
        return try leased.compactMap { refund in
            try payment(c, id: refund.paymentId)?.providerIntent.map { (refund, $0) }
        }
    }

    /// The payment ledger's entry of a refund done (one per refund: a unique index).
    func appendRefundLedger(_ c: Connection, _ refund: RefundRecord, providerReference: String?) throws -> (id: Int, at: Date) {
        let r = try c.first("""
            INSERT INTO dispatch.payment_ledger (payment_id, parcel_id, entry, amount_minor, currency, provider_reference, refund_id)
            VALUES (\(refund.paymentId), \(refund.parcelId), 'refunded', \(refund.amountMinor), \(refund.currency), \(providerReference),
                \(refund.id))
            RETURNING id, at
            """)!
        return (try r["id"], try r["at"])
    }

    /// The wallet's entry of a refund to it, its lock held.
    func appendWalletRefund(_ c: Connection, _ refund: RefundRecord) throws -> (id: Int, at: Date) {
        let r = try c.first("""
            INSERT INTO dispatch.wallet_ledger (user_id, payment_id, parcel_id, entry, amount_minor, currency, refund_id)
            VALUES (\(refund.payerId), \(refund.paymentId), \(refund.parcelId), 'returned', \(refund.amountMinor), \(refund.currency),
                \(refund.id))
            RETURNING id, at
            """)!
        return (try r["id"], try r["at"])
    }
}
