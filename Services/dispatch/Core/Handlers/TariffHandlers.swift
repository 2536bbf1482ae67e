import Foundation
import HTTP
import Models
import Postgres
import Web

/// A new tariff from an operator. The bounds keep every price computation far from overflow and refuse the absurd:
/// express between the standard price and five times it.
struct TariffBody: RequestBody {
    static let schema = Schema.object([
        "currency": .required(.string(min: 3, max: 3, pattern: "^[A-Z]{3}$", rule: "currency must be an ISO 4217 code such as EUR.")),
        "baseMinor": .required(.integer(0...1_000_000)),
        "perKmMinor": .required(.integer(0...100_000)),
        // Express's price in basis points of the standard price: 15000 is half as much again.
        "expressBasisPoints": .required(.integer(10_000...50_000)),
        "insuranceMinor": .required(.integer(0...1_000_000)),
        // Not in the past: a tariff never applies retroactively.
        "effectiveFrom": .required(.dateTime),
        // Who sets it, for the record (the operator token says only that it is an operator's tool).
        "by": .required(.text(max: 100)),
    ])
    let currency: String
    let baseMinor: Int
    let perKmMinor: Int
    let expressBasisPoints: Int
    let insuranceMinor: Int
    let effectiveFrom: String
    let by: String
}

/// A tariff never changes once set (a new one replaces it): its `updatedAt`, which every resource has, is its `createdAt`.
struct TariffView: View {
    let record: TariffRecord
    static let fields: [ViewField<Self>] = [
        .field("id", \.record.id), .field("currency", \.record.tariff.currency), .field("baseMinor", \.record.tariff.baseMinor),
        .field("perKmMinor", \.record.tariff.perKmMinor), .field("expressBasisPoints", \.record.tariff.expressBasisPoints),
        .field("insuranceMinor", \.record.tariff.insuranceMinor), .field("effectiveFrom", \.record.tariff.effectiveFrom),
        .field("createdBy", \.record.createdBy), .field("createdAt", \.record.createdAt), .field("updatedAt", \.record.createdAt),
    ]
}

/// Every tariff, the latest effective first (those not yet in force among them), and the one in force now.
struct TariffsView: View {
    let records: [TariffRecord]
    let now: Date
    var inForce: TariffView? { records.last { $0.tariff.effectiveFrom <= now }.map(TariffView.init) }
    var items: [TariffView] { records.reversed().map(TariffView.init) }
    static let fields: [ViewField<Self>] = [.omitted("inForce", \.inForce), .field("items", \.items)]
}

/// A plan's new monthly price from an operator, for the subscriptions taken from `effectiveFrom` on (one taken
/// before keeps its price).
struct PlanPriceBody: RequestBody {
    static let schema = Schema.object([
        "planId": .required(.oneOf(Plans.kinds.map(\.id))),
        "currency": .required(.string(min: 3, max: 3, pattern: "^[A-Z]{3}$", rule: "currency must be an ISO 4217 code such as EUR.")),
        // At least the provider's least charge.
        "priceMinor": .required(.integer(50...1_000_000)),
        "effectiveFrom": .required(.dateTime),
        "by": .required(.text(max: 100)),
    ])
    let planId: String
    let currency: String
    let priceMinor: Int
    let effectiveFrom: String
    let by: String
}

/// A plan price never changes once set: its `updatedAt` is its `createdAt`.
struct PlanPriceView: View {
    let record: PlanPriceRecord
    static let fields: [ViewField<Self>] = [
        .field("id", \.record.id), .field("planId", \.record.planId), .field("priceMinor", \.record.priceMinor),
        .field("currency", \.record.currency), .field("effectiveFrom", \.record.effectiveFrom), .field("createdBy", \.record.createdBy),
        .field("createdAt", \.record.createdAt), .field("updatedAt", \.record.createdAt),
    ]
}

extension DispatchHandlers {
    /// `GET /v1/operator/tariffs`.
    func listTariffs(_ context: Context<Void>) throws -> Response {
        .json(TariffsView(records: try pool.withConnection { try storage.tariffRecords($0) }, now: Date()))
    }

    /// `POST /v1/operator/tariffs`: 201 with the tariff; quotes made before it takes effect keep theirs (`TariffBook`).
    func setTariff(_ context: Context<Void>, _ body: TariffBody, _ c: Connection) throws -> Response {
        let from = try effective(body.currency, body.effectiveFrom)
        let saved = try storage.insertTariff(c, Tariff(id: UUID.v7(), currency: body.currency, baseMinor: body.baseMinor,
                                                       perKmMinor: body.perKmMinor, expressBasisPoints: body.expressBasisPoints,
                                                       insuranceMinor: body.insuranceMinor, effectiveFrom: from), by: body.by)
        tariffs.forget()
        return .json(TariffView(record: saved), status: 201)
    }

    /// `GET /v1/operator/plan-prices`: every plan's prices, the latest effective first.
    func listPlanPrices(_ context: Context<Void>) throws -> Response {
        .json(ItemList(try pool.withConnection { try storage.planPrices($0) }.map(PlanPriceView.init)))
    }

    /// `POST /v1/operator/plan-prices`: 201 with the price, which subscriptions taken from its time on pay.
    func setPlanPrice(_ context: Context<Void>, _ body: PlanPriceBody, _ c: Connection) throws -> Response {
        let from = try effective(body.currency, body.effectiveFrom)
        return .json(PlanPriceView(record: try storage.insertPlanPrice(c, planId: body.planId, priceMinor: body.priceMinor,
                                                                      currency: body.currency, from: from, by: body.by)), status: 201)
    }

    /// A price's time, in the service's currency only: wallets and plans are held in it.
    private func effective(_ currency: String, _ time: String) throws -> Date {
        guard currency == tariff.currency else {
            throw HTTPError.validation("Dispatch prices in \(tariff.currency) only.", field: "currency")
        }
        guard let from = Timestamp.parse(time) else { throw HTTPError.validation("effectiveFrom must be an RFC 3339 time.", field: "effectiveFrom") }
        return from
    }
}
