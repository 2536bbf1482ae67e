import Events
import Foundation
import Models
import Payments
import Postgres
import Runtime
import Web

/// Where a refund stands: `pending` (a card's, until the provider answers), `refunded`, or `failed` (the provider
/// would not).
enum RefundStatus: String, CaseIterable, PostgresEncodable, PostgresDecodable { case pending, refunded, failed }

/// A refund an operator made of a delivered parcel's payment.
struct RefundRecord: PostgresRecord {
    let id: UUID
    let paymentId: UUID
    let parcelId: UUID
    let payerId: UUID
    let destination: RefundDestination
    let amountMinor: Int
    let currency: String
    let reason: String
    let status: RefundStatus
    let providerRefund: String?
    let failure: String?
    let attempts: Int
    let createdAt: Date
    let updatedAt: Date

    init(_ r: Row) throws {
        id = try r["id"]; paymentId = try r["payment_id"]; parcelId = try r["parcel_id"]; payerId = try r["payer_id"]
        destination = try r["destination"]; amountMinor = try r["amount_minor"]
        currency = try r["currency"]; reason = try r["reason"]; status = try r["status"]
        providerRefund = try r["provider_refund", as: String?.self]; failure = try r["failure", as: String?.self]
        attempts = try r["attempts"]; createdAt = try r["created_at"]; updatedAt = try r["updated_at"]
    }

    static let columns: SQL = """
        id, payment_id, parcel_id, payer_id, destination, amount_minor, currency, reason, status, provider_refund, failure, attempts,
        created_at, updated_at
        """
}

/// An operator's refund as asked for.
struct NewRefund {
    let parcel: UUID
    let amountMinor: Int
    let reason: String
    let to: RefundDestination
}

/// What the refund rules refuse.
enum RefundError: DomainError, Equatable {
    case noParcel
    case notTaken
    case cashToCard
    case walletToCard
    case cardsOff
    case tooMuch(left: Int, currency: String)

    var refusal: Refusal { self == .noParcel ? .notFound : .conflict }
    var field: String? {
        switch self {
        case .noParcel, .notTaken: return nil
        case .cashToCard, .walletToCard, .cardsOff: return "to"
        case .tooMuch: return "amountMinor"
        }
    }
    var message: String {
        switch self {
        case .noParcel: return "No such parcel."
        case .notTaken: return "Nothing was taken for this parcel: only a delivered parcel's payment is refunded (a cancelled one is paid back on its own)."
        case .cashToCard: return "This parcel was paid in cash: there is no card to refund to. Refund it to the wallet."
        case .walletToCard: return "This parcel was paid from the wallet: there is no card to refund to. Refund it to the wallet."
        case .cardsOff: return "Card payments are not set up on this server: refund to the wallet."
        case .tooMuch(let left, let currency): return "At most \(left) (\(currency) minor units) is left to refund of this parcel."
        }
    }
}

/// Refunds after the sale: part or all of what a delivered parcel's payment took, paid back to the card that paid
/// (through the provider) or to the payer's wallet. A refund to the wallet is done in its own transaction; one to
/// the card is written `pending` first, so that it counts against what is left at once and is never lost, then
/// asked of the provider under its own id as the idempotency key (a lost answer is asked again under the same key,
/// so the card is refunded once). Once done, it is one `refunded` row of the payment ledger (and a `returned` row of
/// the wallet's, for the wallet) and a `payment.refunded` event.
struct Refunds: Sendable {
    let storage: DispatchStorage
    let outbox: Outbox
    var wallet: Wallet { Wallet(outbox: outbox) }

    /// Opens `new`, under the payment's row lock: refused unless the parcel was delivered and its payment taken,
    /// to a card only if one paid, and for no more than is left. A card's is due to be asked after `lease` (the
    /// caller asks at once, the settler only if it could not).
    func open(_ c: Connection, _ new: NewRefund, cardsOn: Bool, lease: TimeInterval) throws -> RefundRecord {
        guard let parcel = try storage.parcel(c, new.parcel), let payment = try storage.payment(c, parcel: parcel.id, lock: true) else {
            throw RefundError.noParcel
        }
        guard [.delivered, .received, .readyForCollection].contains(parcel.status),
              [.captured, .cashCollected, .walletDebited].contains(payment.status) else { throw RefundError.notTaken }
        if new.to == .card {
            if payment.method == .cash { throw RefundError.cashToCard }
            if payment.method == .wallet { throw RefundError.walletToCard }
            guard cardsOn, payment.providerIntent != nil else { throw RefundError.cardsOff }
        }
        let left = payment.amountMinor - (try storage.refundedMinor(c, payment: payment.id, pendingToo: true))
        guard new.amountMinor <= left else { throw RefundError.tooMuch(left: left, currency: payment.currency) }
        let refund = try storage.insertRefund(c, id: UUID.v7(), payment: payment, new, dueIn: new.to == .card ? lease : nil)
        return new.to == .wallet ? try finish(c, refund, providerRefund: nil) : refund
    }

    /// Writes down a refund done: its ledger rows and events.
    func finish(_ c: Connection, _ refund: RefundRecord, providerRefund: String?) throws -> RefundRecord {
        guard let payment = try storage.payment(c, id: refund.paymentId) else { preconditionFailure("a refund without its payment") }
        let done = try storage.saveRefund(c, refund.id, status: .refunded, providerRefund: providerRefund, failure: nil)
        let entry = try storage.appendRefundLedger(c, done, providerReference: providerRefund)
        if refund.destination == .wallet {
            try wallet.lock(c, refund.payerId)
            let r = try storage.appendWalletRefund(c, done)
            try outbox.add(WalletRecorded(entryId: r.id, userId: refund.payerId, paymentId: refund.paymentId, parcelId: refund.parcelId,
                                          entry: .returned, amountMinor: refund.amountMinor,
                                          balanceMinor: try wallet.balance(c, refund.payerId, currency: refund.currency),
                                          currency: refund.currency, refundId: refund.id, at: r.at),
                           subject: refund.payerId.lowercased, on: c)
        }
        try outbox.add(PaymentRefunded(entryId: entry.id, refundId: refund.id, paymentId: payment.id, parcelId: refund.parcelId,
                                       payerId: refund.payerId, method: payment.method, to: refund.destination, amountMinor: refund.amountMinor,
                                       refundedMinor: try storage.refundedMinor(c, payment: payment.id, pendingToo: false),
                                       currency: refund.currency, reason: refund.reason, providerReference: providerRefund, at: entry.at),
                       subject: payment.id.lowercased, on: c)
        return done
    }
}

/// Asks the provider for the card refunds due and writes down what it said, as `PaymentSettler` does for payments: a
/// refund is leased for the longest a call may take (two callers never ask at once), asked under the key
/// `refund-<id>`, and asked again with backoff while the provider does not answer; a refusal leaves it `failed`
/// (nothing counts against what is left) for an operator to look at.
struct RefundSettler: Sendable {
    let pool: Pool
    let refunds: Refunds
    let provider: any PaymentProvider
    let lease: TimeInterval
    let logger: Logger

    /// Makes the due calls (or refund `only`'s, if it is pending and nobody else is asking): the number made.
    @discardableResult
    func run(only: UUID? = nil, limit: Int = 20) throws -> Int {
        try ProviderCalls.run(pool, lease: { try refunds.storage.leaseDueRefunds($0, only: only, limit: limit, lease: lease) }) { refund, intent in
            let outcome = provider.refund(intent: intent, amountMinor: refund.amountMinor,
                                          metadata: ["refund_id": refund.id.lowercased, "parcel_id": refund.parcelId.lowercased,
                                                     "reason": refund.reason],
                                          idempotencyKey: "refund-\(refund.id.lowercased)")
            if case .unknown(let why) = outcome {
                logger.warn("the payment provider gave no answer to a refund; asking again later",
                            ["refund": .string(refund.id.lowercased), "reason": .string(why)])
            }
            return { try settle($0, refund.id, outcome) }
        }
    }

    /// Writes down what the provider said about refund `id`, unless it was settled meanwhile.
    func settle(_ c: Connection, _ id: UUID, _ outcome: ProviderOutcome) throws {
        guard let refund = try refunds.storage.refund(c, id, lock: true), refund.status == .pending else { return }
        switch outcome {
        case .unknown, .needsAction:
            // (A refund never waits for the card's holder: an answer that says it does is taken as no answer yet.)
            try refunds.storage.retryRefund(c, id, in: ProviderCalls.backoff(attempts: refund.attempts))
        case .done(let providerRefund, _):
            _ = try refunds.finish(c, refund, providerRefund: providerRefund)
        case .refused(let code, let message):
            _ = try refunds.storage.saveRefund(c, id, status: .failed, providerRefund: nil, failure: String(code.prefix(100)))
            logger.error("the payment provider refused a refund", ["refund": .string(id.lowercased), "code": .string(code),
                                                                  "message": .string(message)])
        }
    }
}
