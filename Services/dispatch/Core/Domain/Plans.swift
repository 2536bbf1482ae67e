import Events
import Foundation
import Models
import Postgres
import Web

/// What a plan gives its subscriber while it runs.
public enum PlanBenefit: String, CaseIterable, Sendable {
    /// Express costs what standard does.
    case expressAtStandardPrice = "express_at_standard_price"
    /// Insuring a parcel costs nothing.
    case insuranceIncluded = "insurance_included"
}

/// A plan of the catalogue: a month's price and its benefits.
struct Plan: Sendable {
    let id: String
    let name: String
    let priceMinor: Int
    let currency: String
    let benefits: [PlanBenefit]
}

/// One subscription: pending until its first month is taken, then active until `periodEnd`, renewed by card a day
/// before it ends unless its subscriber stopped it; `declined` when the first month was refused, `lapsed` when a
/// renewal was.
struct SubscriptionRecord: PostgresRecord {
    let id: UUID
    let userId: UUID
    let planId: String
    var status: String
    let cardPaymentMethod: String?
    /// The provider's customer the card is saved to (made before the first month is taken).
    let providerCustomer: String?
    var periodEnd: Date?
    var renews: Bool
    var renewalPaymentId: UUID?
    /// A month's price, as it was when the subscription was taken: its renewals cost the same.
    let priceMinor: Int?
    let createdAt: Date
    var updatedAt: Date

    init(_ r: Row) throws {
        id = try r["id"]; userId = try r["user_id"]; planId = try r["plan_id"]; status = try r["status"]
        cardPaymentMethod = try r.decode("card_payment_method"); providerCustomer = try r.decode("provider_customer"); periodEnd = try r.decode("period_end"); renews = try r["renews"]
        renewalPaymentId = try r.decode("renewal_payment_id"); priceMinor = try r["price_minor", as: Int?.self]
        createdAt = try r["created_at"]; updatedAt = try r["updated_at"]
    }

    static let columns: SQL = """
        id, user_id, plan_id, status, card_payment_method, provider_customer, period_end, renews, renewal_payment_id, price_minor,
        created_at, updated_at
        """

    /// Its benefits apply now.
    var running: Bool { status == "active" && (periodEnd ?? .distantPast) > Date() }
}

/// The plans: a small catalogue, subscriptions taken and renewed month by month through the payment provider
/// (each month a payment authorised and captured at once), their benefits applied in quotes. Every change of a
/// subscription is one row of an append-only ledger and one `plan.recorded` event.
struct Plans: Sendable {
    let outbox: Outbox

    /// What each plan gives (a benefit is code); its monthly price is data (`plan_prices`, set by an operator).
    static let kinds: [(id: String, name: String, benefits: [PlanBenefit])] = [
        ("plus", "Mesajem Plus", [.expressAtStandardPrice]), ("pro", "Mesajem Pro", [.expressAtStandardPrice, .insuranceIncluded]),
    ]

    /// The plans one may subscribe to now, at their prices in force in `currency` (a plan without one is not offered).
    func catalogue(_ c: Connection, currency: String) throws -> [Plan] {
        let prices = try Dictionary(c.rows("""
            SELECT DISTINCT ON (plan_id) plan_id, price_minor FROM dispatch.plan_prices
            WHERE effective_from <= now() AND currency = \(currency)
            ORDER BY plan_id, effective_from DESC
            """).map { (try $0["plan_id", as: String.self], try $0["price_minor", as: Int.self]) }) { $1 }
        return Self.kinds.compactMap { kind in
            prices[kind.id].map { Plan(id: kind.id, name: kind.name, priceMinor: $0, currency: currency, benefits: kind.benefits) }
        }
    }

    /// A month, as a plan counts it.
    static let period: TimeInterval = 30 * 86_400
    /// How long before its end a subscription is renewed.
    static let renewAhead: TimeInterval = 86_400

    enum Refused: DomainError, Equatable {
        case unknownPlan, alreadySubscribed, notSubscribed
        var refusal: Refusal {
            switch self {
            case .unknownPlan, .notSubscribed: return .notFound
            case .alreadySubscribed: return .conflict
            }
        }
        var field: String? { self == .unknownPlan ? "planId" : nil }
        var message: String {
            switch self {
            case .unknownPlan: return "There is no such plan."
            case .alreadySubscribed: return "You already have a plan: stop it, and subscribe again when it ends."
            case .notSubscribed: return "You have no plan."
            }
        }
    }

    /// `user`'s latest subscription.
    func current(_ c: Connection, _ user: UUID, lock: Bool = false) throws -> SubscriptionRecord? {
        if lock { try c.execute("SELECT pg_advisory_xact_lock(hashtext('dispatch.plans'), hashtext(\(user.lowercased)))") }
        return try c.one(SubscriptionRecord.self, """
            SELECT \(SubscriptionRecord.columns) FROM dispatch.subscriptions WHERE user_id = \(user) ORDER BY created_at DESC LIMIT 1
            """)
    }

    func subscription(_ c: Connection, _ id: UUID, lock: Bool) throws -> SubscriptionRecord? {
        try c.one(SubscriptionRecord.self, """
            SELECT \(SubscriptionRecord.columns) FROM dispatch.subscriptions WHERE id = \(id)\(unescaped: lock ? " FOR UPDATE" : "")
            """)
    }

    /// The plan whose benefits `user` has now, if any.
    func running(_ c: Connection, _ user: UUID, currency: String) throws -> Plan? {
        guard let s = try current(c, user), s.running, let kind = Self.kinds.first(where: { $0.id == s.planId }) else { return nil }
        return Plan(id: kind.id, name: kind.name, priceMinor: s.priceMinor ?? 0, currency: currency, benefits: kind.benefits)
    }

    /// Subscribes `user` to `plan`, paid by `card`: the first month's payment, due after `lease` (the caller asks
    /// the provider first). Refused while another subscription is pending or running.
    func subscribe(_ c: Connection, _ user: UUID, plan: Plan, card: String, storage: DispatchStorage,
                   lease: TimeInterval) throws -> (SubscriptionRecord, PaymentRecord) {
        if let s = try current(c, user, lock: true), s.status == "pending" || s.running || s.renewalPaymentId != nil {
            throw Refused.alreadySubscribed
        }
        let id = UUID.v7()
        let subscription = try c.one(SubscriptionRecord.self, """
            INSERT INTO dispatch.subscriptions (id, user_id, plan_id, status, card_payment_method, price_minor)
            VALUES (\(id), \(user), \(plan.id), 'pending', \(card), \(plan.priceMinor))
            RETURNING \(SubscriptionRecord.columns)
            """)!
        let payment = try storage.insertPayment(c, id: UUID.v7(), purpose: .plan, parcel: nil, subscription: id, payer: user, method: .card,
                                                amountMinor: plan.priceMinor, currency: plan.currency, card: card, status: .pending,
                                                due: .authorise, dueIn: lease)
        return (subscription, payment)
    }

    /// `user`'s plan will not renew: it runs until its period ends.
    func stopRenewing(_ c: Connection, _ user: UUID, currency: String) throws -> SubscriptionRecord {
        guard var s = try current(c, user, lock: true), s.status == "pending" || s.running else { throw Refused.notSubscribed }
        if s.renews {
            s.renews = false
            try save(c, &s)
            try record(c, s, .renewalStopped, amountMinor: 0, currency: currency, payment: nil)
        }
        return s
    }

    /// Opens the payments of the subscriptions due for renewal (up to `limit`): the settler then takes them.
    @discardableResult
    func openRenewals(_ c: Connection, storage: DispatchStorage, currency: String, limit: Int = 20) throws -> Int {
        let due = try c.all(SubscriptionRecord.self, """
            SELECT \(SubscriptionRecord.columns) FROM dispatch.subscriptions
            WHERE status = 'active' AND renews AND renewal_payment_id IS NULL AND card_payment_method IS NOT NULL
              AND period_end <= now() + make_interval(secs => \(Self.renewAhead))
            ORDER BY period_end LIMIT \(limit) FOR UPDATE SKIP LOCKED
            """)
        let prices = due.contains { $0.priceMinor == nil } ? try catalogue(c, currency: currency) : []
        for var s in due {
            guard let price = s.priceMinor ?? prices.first(where: { $0.id == s.planId })?.priceMinor else {
                // A plan nobody prices any more cannot renew: it runs to its end rather than stay first in this queue.
                s.renews = false
                try save(c, &s)
                try record(c, s, .renewalStopped, amountMinor: 0, currency: currency, payment: nil)
                continue
            }
            let payment = try storage.insertPayment(c, id: UUID.v7(), purpose: .plan, parcel: nil, subscription: s.id, payer: s.userId,
                                                    method: .card, amountMinor: price, currency: currency,
                                                    card: s.cardPaymentMethod, status: .pending, due: .authorise, dueIn: 0)
            s.renewalPaymentId = payment.id
            try save(c, &s)
        }
        return due.count
    }

    /// A month's payment was taken: the subscription starts, or runs a month longer (from its end, so a late
    /// renewal loses no days; from now if it had already ended).
    func paid(_ c: Connection, _ p: PaymentRecord) throws {
        guard let id = p.subscriptionId, var s = try subscription(c, id, lock: true) else { return }
        let started = s.status == "pending"
        s.status = "active"
        s.periodEnd = max(s.periodEnd ?? Date(), Date()).addingTimeInterval(Self.period)
        s.renewalPaymentId = nil
        try save(c, &s)
        try record(c, s, started ? .started : .renewed, amountMinor: p.amountMinor, currency: p.currency, payment: p)
    }

    /// A month's card was declined: a new subscription never starts, a running one lapses at its period's end.
    func declined(_ c: Connection, _ p: PaymentRecord) throws {
        guard let id = p.subscriptionId, var s = try subscription(c, id, lock: true) else { return }
        let first = s.status == "pending"
        s.status = first ? "declined" : "lapsed"
        s.renewalPaymentId = nil
        s.renews = false
        try save(c, &s)
        try record(c, s, first ? .declined : .lapsed, amountMinor: 0, currency: p.currency, payment: p)
    }

    /// The provider's customer subscription `id`'s card is saved to.
    func saveCustomer(_ c: Connection, _ id: UUID, _ customer: String) throws {
        try c.execute("UPDATE dispatch.subscriptions SET provider_customer = \(customer), updated_at = now() WHERE id = \(id)")
    }

    private func save(_ c: Connection, _ s: inout SubscriptionRecord) throws {
        s.updatedAt = try c.first("""
            UPDATE dispatch.subscriptions SET status = \(s.status), period_end = \(s.periodEnd), renews = \(s.renews),
                renewal_payment_id = \(s.renewalPaymentId), updated_at = now()
            WHERE id = \(s.id)
            RETURNING updated_at
            """)?["updated_at"] ?? s.updatedAt
    }

    private func record(_ c: Connection, _ s: SubscriptionRecord, _ entry: PlanEntry, amountMinor: Int, currency: String,
                        payment: PaymentRecord?) throws {
        guard let r = try c.first("""
            INSERT INTO dispatch.plan_ledger (subscription_id, user_id, plan_id, entry, amount_minor, currency, payment_id, period_end)
            VALUES (\(s.id), \(s.userId), \(s.planId), \(entry.rawValue), \(amountMinor), \(currency), \(payment?.id), \(s.periodEnd))
            ON CONFLICT (payment_id, entry) WHERE payment_id IS NOT NULL DO NOTHING RETURNING id, at
            """) else { return }
        try outbox.add(PlanRecorded(entryId: try r["id"], subscriptionId: s.id, userId: s.userId, planId: s.planId,
                                    entry: entry, amountMinor: amountMinor, currency: currency, paymentId: payment?.id,
                                    providerReference: payment?.providerIntent, periodEnd: s.periodEnd,
                                    at: try r["at"]),
                       subject: s.id.lowercased, on: c)
    }
}

struct PlanView: View {
    let plan: Plan
    var benefits: [String] { plan.benefits.map(\.rawValue) }
    static let fields: [ViewField<Self>] = [
        .field("id", \.plan.id), .field("name", \.plan.name), .field("priceMinor", \.plan.priceMinor), .field("currency", \.plan.currency),
        .field("benefits", \.benefits),
    ]
}

/// A subscription as its subscriber sees it. `status`: `pending` (the first month being taken), `active`, `ended`
/// (its period is over), `declined` or `lapsed`.
struct SubscriptionView: View {
    let subscription: SubscriptionRecord
    /// A month whose card's holder is to authenticate it (3-D Secure; a renewal's too): its client secret for the app.
    var month: PaymentRecord? = nil
    var clientSecret: String? { month?.requiresAction == true ? month?.clientSecret : nil }
    var authenticateBy: Date? { month?.requiresAction == true ? month?.actionExpiresAt : nil }
    var status: String {
        subscription.status == "active" && !subscription.running && subscription.renewalPaymentId == nil ? "ended" : subscription.status
    }
    static let fields: [ViewField<Self>] = [
        .field("id", \.subscription.id), .field("planId", \.subscription.planId),
        .field("status", \.status, .oneOf(["pending", "active", "ended", "declined", "lapsed"])),
        .omitted("periodEnd", \.subscription.periodEnd), .field("renews", \.subscription.renews),
        .omitted("clientSecret", \.clientSecret), .omitted("authenticateBy", \.authenticateBy),
        .field("createdAt", \.subscription.createdAt), .field("updatedAt", \.subscription.updatedAt),
    ]
}
