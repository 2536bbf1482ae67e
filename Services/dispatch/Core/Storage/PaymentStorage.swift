import Foundation
import Postgres

/// A parcel's payment row: how it is paid, where it stands, and the provider call it waits for (`due`).
struct PaymentRecord {
    let id: UUID
    let parcelId: UUID
    let payerId: UUID
    let method: String
    let amountMinor: Int
    let currency: String
    let cardPaymentMethod: String?
    var status: PaymentStatus
    var providerIntent: String?
    var declineCode: String?
    var due: PaymentCall?
    let attempts: Int

    init(_ r: Row) throws {
        id = try r["id"]; parcelId = try r["parcel_id"]; payerId = try r["payer_id"]; method = try r["method"]
        amountMinor = try r["amount_minor"]; currency = try r["currency"]; cardPaymentMethod = try r.decode("card_payment_method")
        status = PaymentStatus(rawValue: try r["status"]) ?? .pending
        providerIntent = try r.decode("provider_intent"); declineCode = try r.decode("decline_code")
        due = try (r.decode("due") as String?).flatMap(PaymentCall.init(rawValue:)); attempts = try r["attempts"]
    }
}

/// Where a payment stands.
enum PaymentStatus: String, CaseIterable {
    /// A card being authorised.
    case pending
    case authorised, declined, captured, voided
    /// Cash, to be taken by the courier at the hand-over; then `cashCollected`.
    case cashOnDelivery = "cash_on_delivery", cashCollected = "cash_collected"
}

/// The provider call a payment waits for.
enum PaymentCall: String {
    case authorise, capture, void
}

extension DispatchStorage {
    func insertPayment(_ c: Connection, id: UUID, parcel: ParcelRecord, card: String?, status: PaymentStatus, due: PaymentCall?, dueIn: TimeInterval) throws {
        try c.execute("""
            INSERT INTO dispatch.payments (id, parcel_id, payer_id, method, amount_minor, currency, card_payment_method, status, due, due_at)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, CASE WHEN $9::text IS NULL THEN NULL ELSE now() + make_interval(secs => $10) END)
            """, [id, parcel.id, parcel.senderId, parcel.paymentMethod, parcel.quote.amountMinor, parcel.quote.currency,
                  card, status.rawValue, due?.rawValue, dueIn])
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

    private func payment(_ c: Connection, where column: String, _ value: any PostgresEncodable, lock: Bool) throws -> PaymentRecord? {
        try c.first("SELECT * FROM dispatch.payments WHERE \(column) = $1\(lock ? " FOR UPDATE" : "")", [value]).map(PaymentRecord.init)
    }

    /// Leases up to `limit` payments whose call is due: each is left alone by other callers for `lease` seconds, the
    /// longest a call may take, and handed back to the settler after that if this one died. `only`: the one payment
    /// a booking just opened (and leased for its own first call).
    func leaseDuePayments(_ c: Connection, only: UUID? = nil, limit: Int, lease: TimeInterval) throws -> [PaymentRecord] {
        try c.rows("""
            UPDATE dispatch.payments SET due_at = now() + make_interval(secs => $3), attempts = attempts + 1
            WHERE id IN (SELECT id FROM dispatch.payments WHERE due IS NOT NULL AND (CASE WHEN $1::uuid IS NULL THEN due_at <= now() ELSE id = $1 END)
                         ORDER BY due_at LIMIT $2 FOR UPDATE SKIP LOCKED)
            RETURNING *
            """, [only, limit, lease]).map(PaymentRecord.init)
    }

    /// Writes a payment's state; `due` nil: no call is waited for; else in `dueIn` seconds.
    func savePayment(_ c: Connection, _ p: PaymentRecord, dueIn: TimeInterval = 0, resetAttempts: Bool = false) throws {
        try c.execute("""
            UPDATE dispatch.payments SET status = $2, provider_intent = $3, decline_code = $4, due = $5,
                due_at = CASE WHEN $5::text IS NULL THEN NULL ELSE now() + make_interval(secs => $6) END,
                attempts = CASE WHEN $7 THEN 0 ELSE attempts END, updated_at = now()
            WHERE id = $1
            """, [p.id, p.status.rawValue, p.providerIntent, p.declineCode, p.due?.rawValue, dueIn, resetAttempts])
    }

    /// Appends a ledger entry (each kind at most once per payment: the unique index refuses a second capture).
    func appendLedger(_ c: Connection, _ p: PaymentRecord, entry: String, amountMinor: Int, courier: UUID?,
                      centre: UUID?) throws -> (id: Int, at: Date) {
        let r = try c.first("""
            INSERT INTO dispatch.payment_ledger (payment_id, parcel_id, entry, amount_minor, currency, courier_id, provider_reference,
                decline_code, centre_id)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id, at
            """, [p.id, p.parcelId, entry, amountMinor, p.currency, courier, p.providerIntent, entry == "declined" ? p.declineCode : nil,
                  centre])!
        return (try r["id"], try r["at"])
    }

    /// True the first time a provider's event id is seen.
    func firstSight(_ c: Connection, providerEvent id: String, type: String) throws -> Bool {
        try c.execute("INSERT INTO dispatch.provider_events (id, type) VALUES ($1, $2) ON CONFLICT DO NOTHING", [id, type]) == 1
    }

    /// The parcels delivered on `day` (UTC), per courier and currency: their prices, and how each was paid, taken
    /// or still due (a capture the provider has not answered yet). Each is counted once, at its first delivery.
    func deliveredOn(_ c: Connection, day: String) throws -> [ReconciliationRow] {
        try c.rows("""
            WITH delivered AS (
                SELECT DISTINCT ON (h.parcel_id) h.parcel_id, h.actor_id AS courier_id
                FROM dispatch.parcel_history h
                WHERE h.to_status IN ('delivered', 'received', 'ready_for_collection') AND h.from_status IN ('picked_up', 'in_transit')
                  AND h.at >= $1::date AND h.at < $1::date + 1
                ORDER BY h.parcel_id, h.at)
            SELECT d.courier_id, p.currency, count(*)::int AS parcels, sum(p.amount_minor)::int AS price,
                coalesce(sum(l.amount_minor) FILTER (WHERE l.entry = 'cash_collected'), 0)::int AS cash,
                coalesce(sum(l.amount_minor) FILTER (WHERE l.entry = 'captured'), 0)::int AS captured,
                coalesce(sum(m.amount_minor) FILTER (WHERE m.due = 'capture'), 0)::int AS due,
                coalesce(sum(p.amount_minor) FILTER (WHERE p.status = 'ready_for_collection'), 0)::int AS waiting,
                count(*) FILTER (WHERE m.id IS NULL)::int AS unpaid
            FROM delivered d JOIN dispatch.parcels p ON p.id = d.parcel_id
            LEFT JOIN dispatch.payments m ON m.parcel_id = p.id
            LEFT JOIN dispatch.payment_ledger l ON l.payment_id = m.id AND l.entry IN ('captured', 'cash_collected')
            GROUP BY d.courier_id, p.currency ORDER BY p.currency, d.courier_id NULLS FIRST
            """, [day]).map { r in
            ReconciliationRow(courierId: try r.decode("courier_id"), currency: try r["currency"], parcels: try r["parcels"],
                              priceMinor: try r["price"], cashCollectedMinor: try r["cash"], capturedMinor: try r["captured"],
                              captureDueMinor: try r["due"], awaitingCollectionMinor: try r["waiting"], withoutPayment: try r["unpaid"])
        }
    }
}

/// One courier's deliveries of a day in one currency, and how their prices were paid.
struct ReconciliationRow {
    let courierId: UUID?
    let currency: String
    let parcels: Int
    let priceMinor: Int
    let cashCollectedMinor: Int
    let capturedMinor: Int
    let captureDueMinor: Int
    /// Left at a centre for collection, paid for there.
    let awaitingCollectionMinor: Int
    /// Parcels booked before payments were recorded.
    let withoutPayment: Int
    /// What the prices come to beyond what was taken or is due: zero when every delivery is paid for.
    var differenceMinor: Int { priceMinor - cashCollectedMinor - capturedMinor - captureDueMinor - awaitingCollectionMinor }
}
