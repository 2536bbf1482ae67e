import Foundation
import HTTP
import Models
import Postgres
import Web

struct RefundBody: RequestBody {
    static let schema = Schema.object([
        "amountMinor": .required(.integer(1...100_000_000)), "reason": .required(.text(max: 500)),
        "to": .required(.oneOf(RefundDestination.allCases.map(\.rawValue))),
    ])
    let amountMinor: Int
    let reason: String
    let to: String
}

/// Money after the sale: couriers' weekly statements and payouts (from their earnings ledger), and operators'
/// refunds.
extension DispatchHandlers {
    var refunds: Refunds { Refunds(storage: storage, outbox: outbox) }

    /// Card refunds through the provider; nil when none is set up.
    var refundSettler: RefundSettler? {
        payments.map { RefundSettler(pool: pool, refunds: refunds, provider: $0.provider, lease: $0.lease, logger: $0.logger) }
    }

    /// `GET /v1/couriers/me/earnings?week=`: the caller's statement for an ISO week (default this one); 404 for
    /// anyone not a courier.
    func earningsStatement(_ context: Context<Caller>) throws -> Response {
        let week = try ISOWeek.from(context.request), courier = context.caller.userId
        return .json(try pool.withConnection { c in
            guard try storage.courier(c, courier) != nil else { throw HTTPError.notFound("Register as a courier first.") }
            let items = try storage.earnings(c, courier: courier, currency: tariff.currency, from: week.start, to: week.end)
            return EarningsStatementView(week: week, currency: tariff.currency, sharePercent: earnings.sharePercent, items: items)
        })
    }

    /// `GET /v1/operator/payouts?week=`: what each courier earned in an ISO week (default this one), to be paid.
    func payouts(_ context: Context<Void>) throws -> Response {
        let week = try ISOWeek.from(context.request)
        return .json(PayoutsView(week: week, rows: try pool.withConnection { try storage.payouts($0, from: week.start, to: week.end) }))
    }

    /// `POST /v1/operator/parcels/{id}/refunds`: 201 with the refund, `refunded` at once to the wallet; to the card
    /// `refunded` when the provider answered in time, else `pending` (the settler asks again under the same key).
    func refund(_ context: Context<Void>, _ body: RefundBody) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        guard context.request.header("Idempotency-Key") != nil else {
            throw HTTPError.validation("A refund needs an Idempotency-Key: retried without one, it would be made twice.", field: "Idempotency-Key")
        }
        guard let to = RefundDestination(rawValue: body.to) else { throw HTTPError.validation("to must be card or wallet.", field: "to") }
        let new = NewRefund(parcel: id, amountMinor: body.amountMinor, reason: body.reason, to: to)
        let settler = refundSettler, opened = Opened()
        return try idempotency.run(context.request, caller: "operator", finishingWithin: 2 * (settler?.lease ?? 1)) { c in
            let refund = try refunds.open(c, new, cardsOn: settler != nil, lease: settler?.lease ?? 0)
            opened.id = refund.id
            return .json(RefundView(refund: refund), status: 201)
        } then: { response in  // (a first request's only: its answer is the one a retry gets)
            guard to == .card, let id = opened.id, let settler else { return response }
            _ = try? settler.run(only: id)
            return try pool.withConnection { c in try storage.refund(c, id, lock: false).map { .json(RefundView(refund: $0), status: 201) } ?? response }
        }
    }
}

struct RefundView: View {
    let refund: RefundRecord
    static let fields: [ViewField<Self>] = [
        .field("id", \.refund.id), .field("parcelId", \.refund.parcelId), .field("paymentId", \.refund.paymentId),
        .field("to", \.refund.destination.rawValue, .oneOf(RefundDestination.allCases.map(\.rawValue))),
        .field("amountMinor", \.refund.amountMinor), .field("currency", \.refund.currency), .field("reason", \.refund.reason),
        .field("status", \.refund.status.rawValue, .oneOf(RefundStatus.allCases.map(\.rawValue))), .omitted("failure", \.refund.failure),
        .field("createdAt", \.refund.createdAt), .field("updatedAt", \.refund.updatedAt),
    ]
}

/// One parcel of a courier's statement.
struct EarningView: View {
    let earning: EarningRecord
    init(_ earning: EarningRecord) { self.earning = earning }
    static let fields: [ViewField<Self>] = [
        .field("parcelId", \.earning.parcelId), .field("deliveredAt", \.earning.at), .field("priceMinor", \.earning.priceMinor),
        .field("shareMinor", \.earning.amountMinor),
    ]
}

/// A courier's week: each parcel they delivered, their share of it, and the total.
struct EarningsStatementView: View {
    let week: ISOWeek
    let currency: String
    let sharePercent: Int
    let earnings: [EarningRecord]
    init(week: ISOWeek, currency: String, sharePercent: Int, items: [EarningRecord]) {
        self.week = week; self.currency = currency; self.sharePercent = sharePercent; self.earnings = items
    }
    var items: [EarningView] { earnings.map(EarningView.init) }
    var totalMinor: Int { earnings.reduce(0) { $0 + $1.amountMinor } }
    static let fields: [ViewField<Self>] = [
        .field("week", \.week.name), .field("from", \.week.start), .field("to", \.week.end), .field("currency", \.currency),
        .field("sharePercent", \.sharePercent, .integer(0...100)), .field("items", \.items), .field("totalMinor", \.totalMinor),
    ]
}

struct PayoutView: View {
    let row: PayoutRow
    init(_ row: PayoutRow) { self.row = row }
    static let fields: [ViewField<Self>] = [
        .field("courierId", \.row.courierId), .field("currency", \.row.currency), .field("parcels", \.row.parcels),
        .field("totalMinor", \.row.totalMinor),
    ]
}

/// What to pay each courier for a week, and the totals per currency.
struct PayoutsView: View {
    let week: ISOWeek
    let rows: [PayoutRow]
    var items: [PayoutView] { rows.map(PayoutView.init) }
    var totals: [CurrencyTotalView] {
        Dictionary(grouping: rows, by: \.currency).map { CurrencyTotalView(currency: $0.key, totalMinor: $0.value.reduce(0) { $0 + $1.totalMinor }) }
            .sorted { $0.currency < $1.currency }
    }
    static let fields: [ViewField<Self>] = [
        .field("week", \.week.name), .field("from", \.week.start), .field("to", \.week.end), .field("items", \.items),
        .field("totals", \.totals),
    ]
}

struct CurrencyTotalView: View {
    let currency: String
    let totalMinor: Int
    static let fields: [ViewField<Self>] = [.field("currency", \.currency), .field("totalMinor", \.totalMinor)]
}

/// A day's money in one currency, for the reconciliation: what was taken, and the refunds, earnings and what is kept.
struct MoneyRowView: View {
    let row: MoneyRow
    init(_ row: MoneyRow) { self.row = row }
    static let fields: [ViewField<Self>] = [
        .field("currency", \.row.currency), .field("takenMinor", \.row.takenMinor),
        .field("refundedToCardMinor", \.row.refundedToCardMinor), .field("refundedToWalletMinor", \.row.refundedToWalletMinor),
        .field("refundedMinor", \.row.refundedMinor), .field("courierEarningsMinor", \.row.courierEarningsMinor),
        .field("keptMinor", \.row.keptMinor),
    ]
}
