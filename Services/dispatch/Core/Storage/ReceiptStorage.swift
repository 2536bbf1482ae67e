import Foundation
import Models
import Postgres

/// A receipt row.
struct ReceiptRecord: PostgresRecord {
    let number: String
    let paymentId: UUID
    let payerId: UUID
    let purpose: String
    let parcelId: UUID?
    let currency: String
    let totalMinor: Int
    let taxRateBasisPoints: Int
    let taxMinor: Int
    let lines: [ReceiptLine]
    let issuedAt: Date
    var netMinor: Int { totalMinor - taxMinor }

    init(_ r: Row) throws {
        number = try r["number"]; paymentId = try r["payment_id"]; payerId = try r["payer_id"]; purpose = try r["purpose"]
        parcelId = try r["parcel_id", as: UUID?.self]; currency = try r["currency"]; totalMinor = try r["total_minor"]
        taxRateBasisPoints = try r["tax_rate_basis_points"]; taxMinor = try r["tax_minor"]
        lines = try JSONDecoder().decode([ReceiptLine].self, from: Data((try r["lines", as: String.self]).utf8))
        issuedAt = try r["issued_at"]
    }

    static let columns: SQL = """
        number, payment_id, payer_id, purpose, parcel_id, currency, total_minor, tax_rate_basis_points, tax_minor, lines::text AS lines, issued_at
        """
}

extension DispatchStorage {
    /// Issues payment `p`'s receipt under the next number of the year (UTC), the year's counter row incremented in
    /// this transaction.
    func insertReceipt(_ c: Connection, _ p: PaymentRecord, lines: [ReceiptLine], taxRateBasisPoints: Int, taxMinor: Int) throws -> ReceiptRecord {
        let json = String(decoding: try JSONEncoder().encode(lines), as: UTF8.self)
        return try c.one(ReceiptRecord.self, """
            WITH n AS (
                INSERT INTO dispatch.receipt_counters (year, last) VALUES (extract(year FROM now() AT TIME ZONE 'UTC')::int, 1)
                ON CONFLICT (year) DO UPDATE SET last = receipt_counters.last + 1
                RETURNING year, last)
            INSERT INTO dispatch.receipts (number, year, seq, payment_id, payer_id, purpose, parcel_id, currency, total_minor,
                tax_rate_basis_points, tax_minor, lines)
            SELECT 'R' || n.year || '-' || lpad(n.last::text, greatest(6, length(n.last::text)), '0'), n.year, n.last, \(p.id), \(p.payerId),
                \(p.purpose), \(p.parcelId), \(p.currency), \(p.amountMinor), \(taxRateBasisPoints), \(taxMinor), \(json)::jsonb
            FROM n
            RETURNING \(ReceiptRecord.columns)
            """)!
    }

    /// `payer`'s receipts, the newest first.
    func receipts(_ c: Connection, payer: UUID, limit: Int) throws -> [ReceiptRecord] {
        try c.all(ReceiptRecord.self, """
            SELECT \(ReceiptRecord.columns) FROM dispatch.receipts WHERE payer_id = \(payer) ORDER BY issued_at DESC, number DESC LIMIT \(limit)
            """)
    }

    func receipt(_ c: Connection, number: String) throws -> ReceiptRecord? {
        try c.one(ReceiptRecord.self, "SELECT \(ReceiptRecord.columns) FROM dispatch.receipts WHERE number = \(number)")
    }
}
