import Events
import Foundation
import Models
import Payments
import Postgres

/// A card whose holder must authenticate (3-D Secure, routine under Strong Customer Authentication): the provider
/// answers the authorisation with an intent that waits for them. The payment stays `pending` with its authorisation
/// due, and the app, given the intent's client secret, completes it with the provider's SDK; the provider's webhook
/// then says how it ended. The settler asks the provider itself when the webhook is late, and gives the payment up
/// (the intent cancelled, the parcel called off) when the holder has not authenticated within `actionTimeout`.
extension PaymentSettler {
    /// How often the settler asks after an intent waiting for its holder when no webhook has told.
    static let actionPoll: TimeInterval = 30
    /// The decline code of a payment whose holder never authenticated in time.
    static let abandoned = "authentication_abandoned"

    /// What the sender of a parcel called off for its payment reads.
    static func callOffReason(_ code: String) -> String {
        switch code {
        case abandoned: return "The payment was not confirmed in time: book again to pay another way or confirm it promptly."
        case "payment_intent_authentication_failure", "authentication_required":
            return "The card's holder did not confirm the payment (\(code))."
        default: return "The card was declined (\(code))."
        }
    }

    /// Where the intent of payment `p`, whose holder was asked to authenticate, stands: authorised, failed, still
    /// waiting, or (its time up) cancelled and given up.
    func askAfterHolder(_ p: PaymentRecord, intent: String, giveUpAt expires: Date) -> ProviderOutcome {
        let now = provider.retrieve(intent: intent)
        switch now {
        case .done(_, "requires_capture"), .done(_, "succeeded"), .unknown:
            return now
        case .done(_, "canceled"):
            return .refused(code: Self.abandoned, message: "The payment was cancelled before its holder confirmed it.")
        case .refused(let code, _) where code != "authentication_required":  // (that: a renewal's, still to be confirmed)
            return now
        case .done, .needsAction, .refused:  // still with its holder (or being processed)
            guard Date() >= expires else { return .needsAction(intent: intent, clientSecret: p.clientSecret ?? "") }
            let cancelled = provider.void(intent: intent, idempotencyKey: "abandon-\(p.id.lowercased)")
            if case .unknown = cancelled { return cancelled }
            // Cancelled, or refused as cancelled already: nothing is held either way.
            return .refused(code: Self.abandoned, message: "Its holder did not confirm the payment in time.")
        }
    }

    /// Payment `p` waits for its card's holder: the intent and its client secret are kept for the app, and the
    /// settler asks again in `actionPoll` (at the latest when the holder's time is up). A parcel called off meanwhile
    /// is not waited for.
    func awaitHolder(_ c: Connection, _ p: PaymentRecord, _ call: PaymentCall, intent: String, clientSecret: String) throws {
        guard call == .authorise, !clientSecret.isEmpty || p.clientSecret != nil else {
            logger.error("the payment provider asked for an authentication out of turn",
                         ["payment": .string(p.id.lowercased), "call": .string(call.rawValue)])
            return try parcels.storage.savePayment(c, p, dueIn: Self.actionPoll)
        }
        let now = Date()
        var expires = p.actionExpiresAt ?? now.addingTimeInterval(actionTimeout)
        // A renewal's holder is asked to come back (notify tells them): they have until the plan's period ends.
        if p.actionExpiresAt == nil, p.purpose == .plan, let id = p.subscriptionId, let s = try rules.plans.subscription(c, id, lock: false),
           s.status == "active" {
            if let end = s.periodEnd, end > expires { expires = end }
            try rules.outbox.add(PaymentActionRequired(paymentId: p.id, userId: p.payerId, subscriptionId: id, amountMinor: p.amountMinor,
                                                       currency: p.currency, authenticateBy: expires, at: now),
                                 subject: p.payerId.lowercased, on: c)
        }
        if let id = p.parcelId, let parcel = try parcels.storage.parcel(c, id), ParcelLifecycle.isFinal(parcel.status) { expires = now }
        try parcels.storage.awaitHolder(c, p.id, intent: intent, clientSecret: p.clientSecret ?? clientSecret, giveUpAt: expires,
                                        askIn: max(0, min(Self.actionPoll, expires.timeIntervalSince(now))))
    }
}

extension DispatchStorage {
    /// Payment `id` waits for its card's holder until `giveUpAt`; its authorisation is asked after again in `askIn`
    /// seconds.
    func awaitHolder(_ c: Connection, _ id: UUID, intent: String, clientSecret: String, giveUpAt: Date, askIn: TimeInterval) throws {
        try c.execute("""
            UPDATE dispatch.payments SET provider_intent = \(intent), client_secret = \(clientSecret), action_expires_at = \(giveUpAt),
                due_at = now() + make_interval(secs => \(askIn)), attempts = 0, updated_at = now()
            WHERE id = \(id)
            """)
    }

    /// The holder's part is over: the client secret is no longer kept.
    func endHolderWait(_ c: Connection, _ p: inout PaymentRecord) throws {
        p.clientSecret = nil
        try c.execute("UPDATE dispatch.payments SET client_secret = NULL WHERE id = \(p.id)")
    }
}

extension DispatchStorage {
    /// The month of subscription `id` whose card's holder is to authenticate it now, if any.
    func monthAwaitingHolder(_ c: Connection, subscription id: UUID) throws -> PaymentRecord? {
        try c.one(PaymentRecord.self, """
            SELECT \(PaymentRecord.columns) FROM dispatch.payments
            WHERE subscription_id = \(id) AND status = 'pending' AND client_secret IS NOT NULL ORDER BY created_at DESC LIMIT 1
            """)
    }
}

extension PaymentRecord {
    /// Its card's holder is asked to authenticate it now.
    var requiresAction: Bool { status == .pending && clientSecret != nil }
}
