import Foundation
import Postgres
import Models

/// A payment row (a parcel's price, a wallet top-up or a plan's month): how it is paid, where it stands, and the
/// provider call it waits for (`due`).
struct PaymentRecord: PostgresRecord {
    let id: UUID
    let purpose: PaymentPurpose
    /// The parcel paid for (`purpose` parcel), or the subscription (plan).
    let parcelId: UUID?
    let subscriptionId: UUID?
    let payerId: UUID
    let method: PaymentMethod
    let amountMinor: Int
    let currency: String
    let cardPaymentMethod: String?
    var status: PaymentStatus
    var providerIntent: String?
    var declineCode: String?
    var due: PaymentCall?
    let attempts: Int
    let createdAt: Date
    let updatedAt: Date
    /// While its card's holder is asked to authenticate (3-D Secure): the intent's client secret for the app, and
    /// when the payment is given up.
    var clientSecret: String?
    var actionExpiresAt: Date?

    init(_ r: Row) throws {
        id = try r["id"]; purpose = try r["purpose"]; parcelId = try r.decode("parcel_id")
        subscriptionId = try r.decode("subscription_id"); payerId = try r["payer_id"]; method = try r["method"]
        amountMinor = try r["amount_minor"]; currency = try r["currency"]; cardPaymentMethod = try r.decode("card_payment_method")
        status = try r["status"]
        providerIntent = try r.decode("provider_intent"); declineCode = try r.decode("decline_code")
        due = try r.decode("due"); attempts = try r["attempts"]
        createdAt = try r["created_at"]; updatedAt = try r["updated_at"]
        clientSecret = try r["client_secret"]; actionExpiresAt = try r["action_expires_at"]
    }

    static let columns: SQL = """
        id, purpose, parcel_id, subscription_id, payer_id, method, amount_minor, currency, card_payment_method, status, provider_intent,
        decline_code, due, attempts, created_at, updated_at, client_secret, action_expires_at
        """
}

/// Where a payment stands.
enum PaymentStatus: String, CaseIterable, PostgresEncodable, PostgresDecodable {
    /// A card being authorised.
    case pending
    case authorised, declined, captured, voided
    /// Cash, to be taken by the courier at the hand-over; then `cashCollected`.
    case cashOnDelivery = "cash_on_delivery", cashCollected = "cash_collected"
    /// Paid from the sender's wallet at booking; paid back when the parcel was called off.
    case walletDebited = "wallet_debited", walletReturned = "wallet_returned"
}

/// What a payment pays for.
enum PaymentPurpose: String, PostgresEncodable, PostgresDecodable {
    case parcel
    case topUp = "top_up"
    case plan
}

/// The provider call a payment waits for.
enum PaymentCall: String, PostgresEncodable, PostgresDecodable {
    case authorise, capture, void
}

extension DispatchStorage {
    /// A parcel's payment.
    func insertPayment(_ c: Connection, id: UUID, parcel: ParcelRecord, card: String?, status: PaymentStatus, due: PaymentCall?,
                       dueIn: TimeInterval) throws -> PaymentRecord {
        try insertPayment(c, id: id, purpose: .parcel, parcel: parcel.id, subscription: nil, payer: parcel.senderId, method: parcel.paymentMethod,
                          amountMinor: parcel.quote.amountMinor, currency: parcel.quote.currency, card: card, status: status, due: due, dueIn: dueIn)
    }

    func insertPayment(_ c: Connection, id: UUID, purpose: PaymentPurpose, parcel: UUID?, subscription: UUID?, payer: UUID, method: PaymentMethod,
                       amountMinor: Int, currency: String, card: String?, status: PaymentStatus, due: PaymentCall?,
                       dueIn: TimeInterval) throws -> PaymentRecord {
        try c.one(PaymentRecord.self, """
            INSERT INTO dispatch.payments (id, purpose, parcel_id, subscription_id, payer_id, method, amount_minor, currency,
                card_payment_method, status, due, due_at)
            VALUES (\(id), \(purpose), \(parcel), \(subscription), \(payer), \(method), \(amountMinor), \(currency), \(card),
                \(status), \(due),
                CASE WHEN \(due?.rawValue)::text IS NULL THEN NULL ELSE now() + make_interval(secs => \(dueIn)) END)
            RETURNING \(PaymentRecord.columns)
            """)!
    }

    func payment(_ c: Connection, parcel: UUID, lock: Bool = false) throws -> PaymentRecord? {
        try payment(c, where: "parcel_id", parcel, lock: lock)
    }

    func payment(_ c: Connection, id: UUID, lock: Bool = false) throws -> PaymentRecord? {
        try payment(c, where: "id", id, lock: lock)
    }

    func payment(_ c: Connection, providerIntent: String, lock: Bool) throws -> PaymentRecord? {
        try payment(c, where: "provider_intent", providerIntent, lock: lock)
    }

    private func payment<V: PostgresEncodable>(_ c: Connection, where column: String, _ value: V, lock: Bool) throws -> PaymentRecord? {
        try c.one(PaymentRecord.self, Self.paymentSQL(where: column, value, lock: lock))
    }

    /// The payment whose `column` (one of its keys) is `value`.
    static func paymentSQL<V: PostgresEncodable>(where column: String, _ value: V, lock: Bool) -> SQL {
        "SELECT \(PaymentRecord.columns) FROM dispatch.payments WHERE \(unescaped: column) = \(value)\(unescaped: lock ? " FOR UPDATE" : "")"
    }

    /// Leases up to `limit` payments whose call is due: each is left alone by other callers for `lease` seconds, the
    /// longest a call may take, and handed back to the settler after that if this one died. `only`: the one payment
    /// a booking just opened (and leased for its own first call).
    func leaseDuePayments(_ c: Connection, only: UUID? = nil, limit: Int, lease: TimeInterval) throws -> [PaymentRecord] {
        try c.rows("""
            UPDATE dispatch.payments SET due_at = now() + make_interval(secs => \(lease)), attempts = attempts + 1
            WHERE id IN (SELECT id FROM dispatch.payments
                         WHERE due IS NOT NULL AND (CASE WHEN \(only)::uuid IS NULL THEN due_at <= now() ELSE id = \(only) END)
                         ORDER BY due_at LIMIT \(limit) FOR UPDATE SKIP LOCKED)
            RETURNING \(PaymentRecord.columns)
            """).map(PaymentRecord.init)
    }

    /// Writes a payment's state; `due` nil: no call is waited for; else in `dueIn` seconds.
    func savePayment(_ c: Connection, _ p: PaymentRecord, dueIn: TimeInterval = 0, resetAttempts: Bool = false) throws {
        try c.execute("""
            UPDATE dispatch.payments SET status = \(p.status), provider_intent = \(p.providerIntent), decline_code = \(p.declineCode),
                due = \(p.due),
                due_at = CASE WHEN \(p.due?.rawValue)::text IS NULL THEN NULL ELSE now() + make_interval(secs => \(dueIn)) END,
                attempts = CASE WHEN \(resetAttempts) THEN 0 ELSE attempts END, updated_at = now()
            WHERE id = \(p.id)
            """)
    }

    /// Appends a ledger entry (each kind at most once per payment: the unique index refuses a second capture).
    func appendLedger(_ c: Connection, _ p: PaymentRecord, entry: String, amountMinor: Int, courier: UUID?,
                      centre: UUID?) throws -> (id: Int, at: Date) {
        let r = try c.first("""
            INSERT INTO dispatch.payment_ledger (payment_id, parcel_id, entry, amount_minor, currency, courier_id, provider_reference,
                decline_code, centre_id)
            VALUES (\(p.id), \(p.parcelId), \(entry), \(amountMinor), \(p.currency), \(courier), \(p.providerIntent),
                \(entry == "declined" ? p.declineCode : nil), \(centre)) RETURNING id, at
            """)!
        return (try r["id"], try r["at"])
    }

    /// True the first time a provider's event id is seen.
    func firstSight(_ c: Connection, providerEvent id: String, type: String) throws -> Bool {
        try c.execute("INSERT INTO dispatch.provider_events (id, type) VALUES (\(id), \(type)) ON CONFLICT DO NOTHING") == 1
    }

    /// The parcels delivered on `day` (UTC), per courier and currency: their prices, and how each was paid, taken
    /// or still due (a capture the provider has not answered yet). Each is counted once, at its first delivery.
    func deliveredOn(_ c: Connection, day: String) throws -> [ReconciliationRow] {
        try c.rows("""
            WITH delivered AS (
                SELECT DISTINCT ON (h.parcel_id) h.parcel_id, h.actor_id AS courier_id
                FROM dispatch.parcel_history h
                WHERE h.to_status IN ('delivered', 'received', 'ready_for_collection') AND h.from_status IN ('picked_up', 'in_transit')
                  AND h.at >= \(day)::date AND h.at < \(day)::date + 1
                ORDER BY h.parcel_id, h.at)
            SELECT d.courier_id, p.currency, count(*)::int AS parcels, sum(p.amount_minor)::int AS price,
                coalesce(sum(l.amount_minor) FILTER (WHERE l.entry = 'cash_collected'), 0)::int AS cash,
                coalesce(sum(l.amount_minor) FILTER (WHERE l.entry = 'captured'), 0)::int AS captured,
                coalesce(sum(l.amount_minor) FILTER (WHERE l.entry = 'wallet_debited'), 0)::int AS wallet,
                coalesce(sum(m.amount_minor) FILTER (WHERE m.due = 'capture'), 0)::int AS due,
                coalesce(sum(p.amount_minor) FILTER (WHERE p.status = 'ready_for_collection'), 0)::int AS waiting,
                count(*) FILTER (WHERE m.id IS NULL)::int AS unpaid
            FROM delivered d JOIN dispatch.parcels p ON p.id = d.parcel_id
            LEFT JOIN dispatch.payments m ON m.parcel_id = p.id
            LEFT JOIN dispatch.payment_ledger l ON l.payment_id = m.id AND l.entry IN ('captured', 'cash_collected', 'wallet_debited')
            GROUP BY d.courier_id, p.currency ORDER BY p.currency, d.courier_id NULLS FIRST
            """).map { r in
            ReconciliationRow(courierId: try r.decode("courier_id"), currency: try r["currency"], parcels: try r["parcels"],
                              priceMinor: try r["price"], cashCollectedMinor: try r["cash"], capturedMinor: try r["captured"], walletMinor: try r["wallet"],
                              captureDueMinor: try r["due"], awaitingCollectionMinor: try r["waiting"], withoutPayment: try r["unpaid"])
        }
    }
}

extension DispatchStorage {
    /// The cards captured on `day` (UTC) for wallet top-ups and plans, per currency, against what the wallets were
    /// credited and the plans recorded for those payments.
    func creditsOn(_ c: Connection, day: String) throws -> [CreditRow] {
        try c.rows("""
            SELECT m.currency,
                coalesce(sum(l.amount_minor) FILTER (WHERE m.purpose = 'top_up'), 0)::int AS top_ups,
                coalesce(sum(w.amount_minor), 0)::int AS credited,
                coalesce(sum(l.amount_minor) FILTER (WHERE m.purpose = 'plan'), 0)::int AS plans,
                coalesce(sum(pl.amount_minor), 0)::int AS months
            FROM dispatch.payment_ledger l JOIN dispatch.payments m ON m.id = l.payment_id
            LEFT JOIN dispatch.wallet_ledger w ON w.payment_id = m.id AND w.entry = 'topped_up'
            LEFT JOIN dispatch.plan_ledger pl ON pl.payment_id = m.id AND pl.entry IN ('started', 'renewed')
            WHERE l.entry = 'captured' AND m.purpose IN ('top_up', 'plan') AND l.at >= \(day)::date AND l.at < \(day)::date + 1
            GROUP BY m.currency ORDER BY m.currency
            """).map { r in
            CreditRow(currency: try r["currency"], topUpsCapturedMinor: try r["top_ups"], walletCreditedMinor: try r["credited"],
                      plansCapturedMinor: try r["plans"], planMonthsMinor: try r["months"])
        }
    }
}

extension DispatchStorage {
    /// The cash each centre took on `day` (UTC) from recipients collecting parcels, per currency: what its staff
    /// hand in.
    func centreCashOn(_ c: Connection, day: String) throws -> [CentreCashRow] {
        try c.rows("""
            SELECT centre_id, currency, count(*)::int AS parcels, sum(amount_minor)::int AS cash FROM dispatch.payment_ledger
            WHERE entry = 'cash_collected' AND centre_id IS NOT NULL AND at >= \(day)::date AND at < \(day)::date + 1
            GROUP BY centre_id, currency ORDER BY currency, centre_id
            """).map { r in
            CentreCashRow(centreId: try r["centre_id"], currency: try r["currency"], parcels: try r["parcels"], cashCollectedMinor: try r["cash"])
        }
    }
}

struct CentreCashRow {
    let centreId: UUID
    let currency: String
    let parcels: Int
    let cashCollectedMinor: Int
}

/// A day's cards captured for top-ups and plans in one currency, and what they bought.
struct CreditRow {
    let currency: String
    let topUpsCapturedMinor: Int
    let walletCreditedMinor: Int
    let plansCapturedMinor: Int
    let planMonthsMinor: Int
    /// Zero when every top-up reached its wallet and every plan payment its month.
    var differenceMinor: Int { topUpsCapturedMinor - walletCreditedMinor + plansCapturedMinor - planMonthsMinor }
}

/// One courier's deliveries of a day in one currency, and how their prices were paid.
struct ReconciliationRow {
    let courierId: UUID?
    let currency: String
    let parcels: Int
    let priceMinor: Int
    let cashCollectedMinor: Int
    let capturedMinor: Int
    /// Paid from senders' wallets at booking.
    let walletMinor: Int
    let captureDueMinor: Int
    /// Left at a centre for collection, paid for there.
    let awaitingCollectionMinor: Int
    /// Parcels booked before payments were recorded.
    let withoutPayment: Int
    /// What the prices come to beyond what was taken or is due: zero when every delivery is paid for.
    var differenceMinor: Int { priceMinor - cashCollectedMinor - capturedMinor - walletMinor - captureDueMinor - awaitingCollectionMinor }
}
