import Foundation
import Postgres

/// A tariff's row, with who set it and when.
struct TariffRecord: PostgresRecord {
    let id: UUID
    let tariff: Tariff
    let createdBy: String
    let createdAt: Date

    init(_ r: Row) throws {
        id = try r["id"]
        tariff = Tariff(id: id, currency: try r["currency"], baseMinor: try r["base_minor"], perKmMinor: try r["per_km_minor"],
                        expressBasisPoints: try r["express_basis_points"], insuranceMinor: try r["insurance_minor"],
                        effectiveFrom: try r["effective_from"])
        createdBy = try r["created_by"]; createdAt = try r["created_at"]
    }

    static let columns: SQL = """
        id, currency, base_minor, per_km_minor, express_basis_points, insurance_minor, effective_from, created_by, created_at
        """
}

extension DispatchStorage {
    /// Every tariff, the earliest effective first.
    func tariffRecords(_ c: Connection) throws -> [TariffRecord] {
        try c.all(TariffRecord.self, "SELECT \(TariffRecord.columns) FROM dispatch.tariffs ORDER BY effective_from")
    }

    func tariffs(_ c: Connection) throws -> [Tariff] { try tariffRecords(c).map(\.tariff) }

    /// The tariff parcel `id` was priced by (nil for one booked before tariffs were data: the default's).
    func tariff(_ c: Connection, ofParcel id: UUID) throws -> Tariff? {
        try c.one(TariffRecord.self, """
            SELECT \(TariffRecord.columns) FROM dispatch.tariffs WHERE id = (SELECT tariff_id FROM dispatch.parcels WHERE id = \(id))
            """)?.tariff
    }

    /// Saves a tariff effective from `tariff.effectiveFrom`, which must not be before now (the database's clock).
    func insertTariff(_ c: Connection, _ tariff: Tariff, by who: String) throws -> TariffRecord {
        let saved = try c.one(TariffRecord.self, """
            INSERT INTO dispatch.tariffs (id, currency, base_minor, per_km_minor, express_basis_points, insurance_minor, effective_from, created_by)
            SELECT \(tariff.id ?? UUID.v7()), \(tariff.currency), \(tariff.baseMinor), \(tariff.perKmMinor), \(tariff.expressBasisPoints),
                \(tariff.insuranceMinor), \(tariff.effectiveFrom), \(who)
            WHERE \(tariff.effectiveFrom)::timestamptz >= now()
            ON CONFLICT (effective_from) DO NOTHING
            RETURNING \(TariffRecord.columns)
            """)
        if let saved { return saved }
        throw try isPast(c, tariff.effectiveFrom) ? TariffBook.Refused.retroactive : TariffBook.Refused.sameTime
    }
}

/// A plan's monthly price from a time.
struct PlanPriceRecord: PostgresRecord {
    let id: UUID
    let planId: String
    let priceMinor: Int
    let currency: String
    let effectiveFrom: Date
    let createdBy: String
    let createdAt: Date

    init(_ r: Row) throws {
        id = try r["id"]; planId = try r["plan_id"]; priceMinor = try r["price_minor"]; currency = try r["currency"]
        effectiveFrom = try r["effective_from"]; createdBy = try r["created_by"]; createdAt = try r["created_at"]
    }

    static let columns: SQL = "id, plan_id, price_minor, currency, effective_from, created_by, created_at"
}

extension DispatchStorage {
    /// Every plan price, the latest effective first.
    func planPrices(_ c: Connection) throws -> [PlanPriceRecord] {
        try c.all(PlanPriceRecord.self, "SELECT \(PlanPriceRecord.columns) FROM dispatch.plan_prices ORDER BY effective_from DESC, plan_id")
    }

    /// Saves plan `planId`'s price from `from`, which must not be before now (the database's clock).
    func insertPlanPrice(_ c: Connection, planId: String, priceMinor: Int, currency: String, from: Date, by who: String) throws -> PlanPriceRecord {
        let saved = try c.one(PlanPriceRecord.self, """
            INSERT INTO dispatch.plan_prices (id, plan_id, price_minor, currency, effective_from, created_by)
            SELECT \(UUID.v7()), \(planId), \(priceMinor), \(currency), \(from), \(who)
            WHERE \(from)::timestamptz >= now()
            ON CONFLICT (plan_id, effective_from) DO NOTHING
            RETURNING \(PlanPriceRecord.columns)
            """)
        if let saved { return saved }
        throw try isPast(c, from) ? TariffBook.Refused.retroactive : TariffBook.Refused.sameTime
    }

    private func isPast(_ c: Connection, _ time: Date) throws -> Bool {
        try c.first("SELECT \(time)::timestamptz < now() AS past")?["past"] ?? true
    }
}
