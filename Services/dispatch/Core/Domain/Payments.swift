import Events
import Foundation
import Models
import Payments
import Postgres
import Runtime
import Web

/// The payment rules, applied in the transaction of the change they follow: a card parcel's payment opens pending
/// (to be authorised), a cash parcel's on delivery, a wallet parcel's paid from the wallet at once; a delivery makes
/// a card's capture due and records the courier's cash; a cancelled or failed parcel makes a held card's release
/// due and pays a wallet back. Every change of a parcel's payment is one ledger row and one `payment.recorded`
/// event; a top-up's or a plan's (taken at once once authorised) is a ledger row, and its event the wallet's or the
/// plan's.
struct PaymentRules: Sendable {
    let storage: DispatchStorage
    let outbox: Outbox
    var wallet: Wallet { Wallet(outbox: outbox) }
    var plans: Plans { Plans(outbox: outbox) }

    /// The payment of a parcel just booked. A card's authorisation is due once `lease` has passed: the booking
    /// asks the provider first, and the settler only if it could not (it died, or the provider did not answer).
    func open(_ c: Connection, _ parcel: ParcelRecord, card: String?, lease: TimeInterval) throws {
        switch parcel.paymentMethod {
        case .card:
            try admitCard(c, payer: parcel.senderId)
            _ = try storage.insertPayment(c, id: UUID.v7(), parcel: parcel, card: card, status: .pending, due: .authorise, dueIn: lease)
        case .wallet:
            let p = try storage.insertPayment(c, id: UUID.v7(), parcel: parcel, card: nil, status: .walletDebited, due: nil, dueIn: 0)
            try wallet.spend(c, parcel.senderId, payment: p.id, parcel: parcel.id, amountMinor: p.amountMinor, currency: p.currency)
            try record(c, p, .walletDebited, amountMinor: p.amountMinor)
        case .cash:
            _ = try storage.insertPayment(c, id: UUID.v7(), parcel: parcel, card: nil, status: .cashOnDelivery, due: nil, dueIn: 0)
        }
    }

    /// How many declined cards an account may have in a day before it may try no more.
    static let declinesAllowed = 5

    /// Card testers try stolen cards one after another through whatever authorises them (bookings, top-ups,
    /// plans): an account with `declinesAllowed` cards declined within a day tries no card until the oldest of
    /// those is a day old (429 with `Retry-After`). Cash and the wallet still work; other accounts are not touched.
    func admitCard(_ c: Connection, payer: UUID) throws {
        let r = try c.first("""
            SELECT count(*)::int AS n, coalesce(extract(epoch FROM min(updated_at) + interval '1 day' - now()), 0)::int AS wait
            FROM (SELECT updated_at FROM dispatch.payments
                  WHERE payer_id = \(payer) AND status = 'declined' AND updated_at > now() - interval '1 day'
                  ORDER BY updated_at DESC LIMIT \(Self.declinesAllowed)) latest
            """)
        let declined: Int = try r?["n"] ?? 0, wait: Int = try r?["wait"] ?? 0
        if declined >= Self.declinesAllowed { throw PaymentError.cardsPaused(retryAfter: max(1, wait)) }
    }

    /// What a parcel's move means for its payment (parcels booked before payments existed have none). Only the moves
    /// that end a parcel (delivered, handed over, collected, cancelled, failed) touch it: the others do not read it.
    func follow(_ c: Connection, _ parcel: ParcelRecord, _ action: ParcelAction, cashCollected: Int?) throws {
        guard cashCollected != nil || [.deliver, .handOver, .collect, .cancel, .fail].contains(action) else { return }
        guard var payment = try storage.payment(c, parcel: parcel.id, lock: true) else { return }
        if cashCollected != nil && payment.method != .cash { throw PaymentError.noCashDue }
        switch (action, payment.status) {
        case (.deliver, .authorised), (.handOver, .authorised), (.collect, .authorised):
            payment.due = .capture
            try storage.savePayment(c, payment, resetAttempts: true)
        case (.deliver, .cashOnDelivery), (.handOver, .cashOnDelivery), (.collect, .cashOnDelivery):
            if let cashCollected, cashCollected != payment.amountMinor { throw PaymentError.wrongCash(expected: payment.amountMinor) }
            payment.status = .cashCollected
            try storage.savePayment(c, payment)
            // At the door the courier takes it; at a centre, the centre does.
            try record(c, payment, .cashCollected, amountMinor: payment.amountMinor, courier: action == .collect ? nil : parcel.courierId,
                       centre: action == .collect ? parcel.collectionCentreId : nil)
        case (.cancel, .authorised), (.fail, .authorised):
            payment.due = .void
            try storage.savePayment(c, payment, resetAttempts: true)
        case (.cancel, .walletDebited), (.fail, .walletDebited):
            payment.status = .walletReturned
            try storage.savePayment(c, payment)
            try wallet.record(c, payment.payerId, payment: payment.id, parcel: parcel.id, .returned, payment.amountMinor, payment.currency)
            try record(c, payment, .walletReturned, amountMinor: payment.amountMinor)
        default:
            // A card still being authorised when its parcel is cancelled is released once the provider answers.
            break
        }
    }

    /// Writes a ledger entry and its event.
    func record(_ c: Connection, _ p: PaymentRecord, _ entry: PaymentEntry, amountMinor: Int, courier: UUID? = nil, centre: UUID? = nil) throws {
        let e = try storage.appendLedger(c, p, entry: entry.rawValue, amountMinor: amountMinor, courier: courier, centre: centre)
        guard let parcelId = p.parcelId else { return }  // a top-up's or a plan's: told by the wallet's or plan's event
        try outbox.add(PaymentRecorded(entryId: e.id, paymentId: p.id, parcelId: parcelId, method: p.method,
                                       entry: entry, amountMinor: amountMinor, currency: p.currency, courierId: courier,
                                       providerReference: p.providerIntent, declineCode: entry == .declined ? p.declineCode : nil,
                                       at: e.at),
                       subject: p.id.lowercased, on: c)
    }
}

/// A provider call that could not be made, and what it comes to.
struct FailedCall: Error {
    let outcome: ProviderOutcome
}

/// What the payment rules refuse.
enum PaymentError: DomainError, Equatable {
    case wrongCash(expected: Int)
    case noCashDue
    case cardsOff
    case cardMissing
    case cardsPaused(retryAfter: Int)

    var refusal: Refusal {
        if case .cardsPaused(let seconds) = self { return .rateLimited(retryAfter: seconds) }
        return .invalid
    }
    var field: String? {
        switch self {
        case .wrongCash, .noCashDue: return "cashCollectedMinor"
        case .cardsOff: return "paymentMethod"
        case .cardMissing, .cardsPaused: return "cardPaymentMethod"
        }
    }
    var message: String {
        switch self {
        case .wrongCash(let expected): return "The courier collects the parcel's price in cash: \(expected) in minor units."
        case .noCashDue: return "This parcel is paid already: there is no cash to collect."
        case .cardsOff: return "Card payments are not set up on this server: pay in cash."
        case .cardMissing: return "A card payment needs the card (cardPaymentMethod)."
        case .cardsPaused: return "Too many cards were declined on this account today: pay in cash or from the wallet, or try a card later."
        }
    }
}

/// Calls to a payment provider that are made outside any transaction: what is due is leased in one (for the longest a
/// call may take, so that two callers never ask at once), asked, and what the provider said written down in another.
enum ProviderCalls {
    /// Leases what is due, asks each (`ask` returns how to write down its answer, nil for nothing to ask): the number
    /// leased.
    static func run<Due>(_ pool: Pool, lease: (Connection) throws -> [Due], ask: (Due) -> ((Connection) throws -> Void)?) throws -> Int {
        let leased = try pool.withTransaction { try lease($0) }
        for due in leased {
            guard let settle = ask(due) else { continue }
            try pool.withTransaction { try settle($0) }
        }
        return leased.count
    }

    /// How long to wait before asking again a call the provider did not answer: 2, 4, 8 ... seconds, at most five minutes.
    static func backoff(attempts: Int) -> TimeInterval { min(300, pow(2, Double(min(attempts, 9)))) }
}

/// Makes the provider calls payments wait for, and writes down what the provider said: a card authorised lets its
/// parcel be offered, a declined one calls it off; a capture or release is recorded once. A call without an answer
/// is asked again later under the same idempotency key, so the provider acts once however often it is asked
/// (after a crash, the next start's settler asks; a webhook may tell first).
struct PaymentSettler: Sendable {
    let pool: Pool
    let parcels: Parcels
    let provider: any PaymentProvider
    /// The longest a call may take: a payment is leased for it, so that two callers never ask at once.
    let lease: TimeInterval
    /// The currency plans are sold in (the tariff's).
    let currency: String
    let logger: Logger
    /// Told when a parcel may be offered now (the matching loop whose share it is in runs at once).
    let authorised: @Sendable (UUID) -> Void
    /// How long a card's holder has to authenticate (3-D Secure) before the payment is given up.
    var actionTimeout: TimeInterval = 900
    /// The tax prices include, for the receipts (`TAX_RATE_BASIS_POINTS`).
    var taxRateBasisPoints = 0

    var rules: PaymentRules { parcels.payments }

    /// Makes the due calls (or the one of payment `only`, if it is due and nobody else is making it), after opening
    /// the renewals of plans due. The number made.
    @discardableResult
    func run(only: UUID? = nil, limit: Int = 20) throws -> Int {
        if only == nil { _ = try pool.withTransaction { try rules.plans.openRenewals($0, storage: parcels.storage, currency: currency) } }
        return try ProviderCalls.run(pool, lease: { try parcels.storage.leaseDuePayments($0, only: only, limit: limit, lease: lease) }) { payment in
            guard let call = payment.due else { return nil }
            let outcome = ask(call, payment)
            if case .unknown(let why) = outcome {
                logger.warn("the payment provider gave no answer; asking again later",
                            ["payment": .string(payment.id.lowercased), "call": .string(call.rawValue), "reason": .string(why)])
            }
            return { try settle($0, payment.id, call, outcome) }
        }
    }

    private func ask(_ call: PaymentCall, _ p: PaymentRecord) -> ProviderOutcome {
        let key = "\(call.rawValue)-\(p.id.lowercased)"
        switch call {
        case .authorise:
            if let intent = p.providerIntent, let expires = p.actionExpiresAt { return askAfterHolder(p, intent: intent, giveUpAt: expires) }
            // A parcel's as before top-ups and plans existed: a call asked again after an upgrade must carry the
            // same parameters, or the provider refuses its idempotency key.
            var metadata = ["payment_id": p.id.lowercased]
            if let parcel = p.parcelId { metadata["parcel_id"] = parcel.lowercased } else { metadata["purpose"] = p.purpose.rawValue }
            metadata["subscription_id"] = p.subscriptionId?.lowercased
            var use = CardUse.once
            if p.purpose == .plan {
                switch planCard(p) {
                case .success(let planUse): use = planUse
                case .failure(let failed): return failed.outcome
                }
            }
            return provider.authorise(amountMinor: p.amountMinor, currency: p.currency, paymentMethod: p.cardPaymentMethod ?? "",
                                      use: use, metadata: metadata, idempotencyKey: key)
        case .capture: return provider.capture(intent: p.providerIntent ?? "", idempotencyKey: key)
        case .void: return provider.void(intent: p.providerIntent ?? "", idempotencyKey: key)
        }
    }

    /// A plan's card is saved to a customer of the provider with its first month, and charged without its holder
    /// for the renewals (as the provider requires of a card used again). The customer is made once per
    /// subscription (its idempotency key), before the first month.
    private func planCard(_ p: PaymentRecord) -> Result<CardUse, FailedCall> {
        guard let id = p.subscriptionId, let s = try? pool.withConnection({ try rules.plans.subscription($0, id, lock: false) }) else {
            return .failure(FailedCall(outcome: .unknown("the subscription could not be read")))
        }
        var customer = s.providerCustomer
        if customer == nil {
            let outcome = provider.createCustomer(metadata: ["subscription_id": id.lowercased], idempotencyKey: "customer-\(id.lowercased)")
            guard case .done(let made, _) = outcome else { return .failure(FailedCall(outcome: outcome)) }
            guard (try? pool.withTransaction { try rules.plans.saveCustomer($0, id, made) }) != nil else {
                return .failure(FailedCall(outcome: .unknown("the customer could not be written down")))
            }
            customer = made
        }
        return .success(s.status == "pending" ? .save(customer: customer ?? "") : .offSession(customer: customer ?? ""))
    }

    /// Writes down what the provider said about `call` on payment `id`, unless the payment has moved on meanwhile
    /// (a webhook told first).
    func settle(_ c: Connection, _ id: UUID, _ call: PaymentCall, _ outcome: ProviderOutcome) throws {
        guard var p = try parcels.storage.payment(c, id: id, lock: true), p.due == call else { return }
        switch outcome {
        case .unknown:
            try parcels.storage.savePayment(c, p, dueIn: ProviderCalls.backoff(attempts: p.attempts))
        case .needsAction(let intent, let secret):
            try awaitHolder(c, p, call, intent: intent, clientSecret: secret)
        case .done(let intent, _):
            if p.clientSecret != nil { try parcels.storage.endHolderWait(c, &p) }
            p.due = nil
            switch call {
            case .authorise: try authorised(c, &p, intent: intent)
            case .capture:
                p.status = .captured
                try parcels.storage.savePayment(c, p)
                try rules.record(c, p, .captured, amountMinor: p.amountMinor)
                try Receipts(outbox: rules.outbox, taxRateBasisPoints: taxRateBasisPoints).issue(c, p, storage: parcels.storage)
                switch p.purpose {
                case .parcel: break
                case .topUp: try rules.wallet.record(c, p.payerId, payment: p.id, parcel: nil, .toppedUp, p.amountMinor, p.currency)
                case .plan: try rules.plans.paid(c, p)
                }
            case .void:
                p.status = .voided
                try parcels.storage.savePayment(c, p)
                try rules.record(c, p, .voided, amountMinor: p.amountMinor)
            }
        case .refused(let code, let message):
            if p.clientSecret != nil { try parcels.storage.endHolderWait(c, &p) }
            p.due = nil
            if call == .authorise {
                p.status = .declined
                p.declineCode = String(code.prefix(100))
                try parcels.storage.savePayment(c, p)
                try rules.record(c, p, .declined, amountMinor: 0)
                if p.purpose == .plan { try rules.plans.declined(c, p) }
                if let id = p.parcelId, let parcel = try parcels.storage.parcel(c, id, lock: true), [.awaitingPayment, .awaitingDropOff].contains(parcel.status) {
                    var declined = parcel
                    declined.failureReason = Self.callOffReason(p.declineCode ?? "declined")
                    _ = try parcels.apply(c, declined, .paymentDeclined, actor: .system, actorId: nil, place: nil)
                }
            } else {
                // A capture or release the provider will not make (say, the hold expired): an operator's to look at.
                try parcels.storage.savePayment(c, p)
                logger.error("the payment provider refused a call", ["payment": .string(p.id.lowercased), "call": .string(call.rawValue),
                                                                     "code": .string(code), "message": .string(message)])
            }
        }
    }

    /// The card holds the price: the parcel may be offered (or, at a centre, taken in); if it was cancelled
    /// meanwhile, the hold is released. A top-up or a plan's month is taken at once.
    private func authorised(_ c: Connection, _ p: inout PaymentRecord, intent: String) throws {
        p.status = .authorised
        p.providerIntent = intent
        let parcel = try p.parcelId.flatMap { try parcels.storage.parcel(c, $0, lock: true) }
        if p.purpose != .parcel { p.due = .capture }
        if let parcel, ParcelLifecycle.isFinal(parcel.status) { p.due = .void }
        try parcels.storage.savePayment(c, p, resetAttempts: true)
        try rules.record(c, p, .authorised, amountMinor: p.amountMinor)
        if let parcel, parcel.status == .awaitingPayment {
            _ = try parcels.apply(c, parcel, .paymentAuthorised, actor: .system, actorId: nil, place: nil)
            c.afterCommit { authorised(parcel.id) }
        }
    }

    /// A provider's webhook event (signature checked, seen for the first time): the PaymentIntent it carries says
    /// what the provider did, which settles a call whose answer was lost.
    func webhook(_ c: Connection, type: String, intent: [String: Any]) throws {
        guard let intentId = intent["id"] as? String else { return }
        let metadata = intent["metadata"] as? [String: Any] ?? [:]
        let payment = try (metadata["payment_id"] as? String).flatMap(UUID.init(uuidString:)).flatMap { try parcels.storage.payment(c, id: $0) }
            ?? parcels.storage.payment(c, providerIntent: intentId, lock: false)
        guard let payment, let due = payment.due else { return }
        // Once its holder's time is up the settler alone decides (it gives the payment up, or finds it authorised).
        if due == .authorise, let expires = payment.actionExpiresAt, expires <= Date() { return }
        switch (type, due) {
        case ("payment_intent.amount_capturable_updated", .authorise), ("payment_intent.succeeded", .capture),
             ("payment_intent.canceled", .void):
            try settle(c, payment.id, due, .done(intent: intentId, status: intent["status"] as? String ?? ""))
        case ("payment_intent.canceled", .authorise):
            try settle(c, payment.id, due, .refused(code: intent["cancellation_reason"] as? String ?? "canceled", message: "The payment was cancelled."))
        case ("payment_intent.payment_failed", .authorise):
            let error = intent["last_payment_error"] as? [String: Any] ?? [:]
            // A renewal that needs its holder is not over: the settler keeps it for them to confirm.
            if error["code"] as? String == "authentication_required" { return }
            try settle(c, payment.id, due, .refused(code: error["decline_code"] as? String ?? error["code"] as? String ?? "declined",
                                                    message: error["message"] as? String ?? ""))
        default: break
        }
    }
}
