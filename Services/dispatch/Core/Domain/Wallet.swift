import Events
import Foundation
import Models
import Postgres
import Web

/// A sender's wallet: money topped up by card (a payment taken at once), spent on a booking in full at the booking,
/// and paid back when that booking is called off or fails. Every change is one row of an append-only ledger, at most
/// one of a kind per payment, and one `wallet.recorded` event; the balance is the ledger's sum, never stored.
struct Wallet: Sendable {
    let outbox: Outbox

    /// The least and most one top-up may bring, in minor units.
    static let topUpRange = 500...50_000

    /// What the rules refuse.
    enum Refused: DomainError, Equatable {
        case notEnough(balance: Int, currency: String)
        var refusal: Refusal { .invalid }
        var field: String? { "paymentMethod" }
        var message: String {
            switch self {
            case .notEnough(let balance, let currency):
                return "Your wallet holds \(balance) (\(currency) minor units): top it up or pay otherwise."
            }
        }
    }

    /// `user`'s balance in `currency`.
    func balance(_ c: Connection, _ user: UUID, currency: String) throws -> Int {
        try c.first("""
            SELECT coalesce(sum(CASE WHEN entry = 'spent' THEN -amount_minor ELSE amount_minor END), 0)::int AS balance
            FROM dispatch.wallet_ledger WHERE user_id = \(user) AND currency = \(currency)
            """)!["balance"]
    }

    /// Holds `user`'s wallet until the transaction ends: two bookings cannot spend it twice, and an event's balance
    /// is the one after its entry.
    func lock(_ c: Connection, _ user: UUID) throws {
        try c.execute("SELECT pg_advisory_xact_lock(hashtext('dispatch.wallet'), hashtext(\(user.lowercased)))")
    }

    /// Spends `amountMinor` of `user`'s for payment `payment` of `parcel`: refused when the wallet holds less.
    func spend(_ c: Connection, _ user: UUID, payment: UUID, parcel: UUID, amountMinor: Int, currency: String) throws {
        try lock(c, user)
        let balance = try self.balance(c, user, currency: currency)
        guard amountMinor <= balance else { throw Refused.notEnough(balance: balance, currency: currency) }
        try append(c, user, payment: payment, parcel: parcel, .spent, amountMinor, currency)
    }

    /// Writes an entry (once per payment and kind) and its event, under the wallet's lock.
    func record(_ c: Connection, _ user: UUID, payment: UUID, parcel: UUID?, _ entry: WalletEntry, _ amountMinor: Int, _ currency: String) throws {
        try lock(c, user)
        try append(c, user, payment: payment, parcel: parcel, entry, amountMinor, currency)
    }

    /// The entry and its event, the wallet's lock held.
    private func append(_ c: Connection, _ user: UUID, payment: UUID, parcel: UUID?, _ entry: WalletEntry, _ amountMinor: Int,
                        _ currency: String) throws {
        guard amountMinor > 0, let r = try c.first("""
            INSERT INTO dispatch.wallet_ledger (user_id, payment_id, parcel_id, entry, amount_minor, currency)
            VALUES (\(user), \(payment), \(parcel), \(entry.rawValue), \(amountMinor), \(currency))
            ON CONFLICT (payment_id, entry) WHERE refund_id IS NULL DO NOTHING RETURNING id, at
            """) else { return }
        try outbox.add(WalletRecorded(entryId: try r["id"], userId: user, paymentId: payment, parcelId: parcel,
                                      entry: entry, amountMinor: amountMinor, balanceMinor: try balance(c, user, currency: currency),
                                      currency: currency, at: try r["at"]),
                       subject: user.lowercased, on: c)
    }

    /// `user`'s balance in `currency` and their latest `limit` entries, the newest first, with the top-ups still
    /// being taken.
    func statement(_ c: Connection, _ user: UUID, currency: String, limit: Int) throws -> WalletView {
        let entries = try c.rows("""
            SELECT entry, amount_minor, parcel_id, at FROM dispatch.wallet_ledger WHERE user_id = \(user) AND currency = \(currency)
            ORDER BY id DESC LIMIT \(limit)
            """).map { r in
            WalletEntryView(entry: try r["entry"], amountMinor: try r["amount_minor"], parcelId: try r.decode("parcel_id"), at: try r["at"])
        }
        let pending: Int = try c.first("""
            SELECT coalesce(sum(amount_minor), 0)::int AS pending FROM dispatch.payments
            WHERE payer_id = \(user) AND purpose = 'top_up' AND currency = \(currency) AND status IN ('pending', 'authorised')
            """)!["pending"]
        return WalletView(currency: currency, balanceMinor: try balance(c, user, currency: currency), pendingTopUpsMinor: pending, items: entries)
    }
}

struct WalletView: View {
    let currency: String
    let balanceMinor: Int
    /// Top-ups the provider has not finished taking yet.
    let pendingTopUpsMinor: Int
    let items: [WalletEntryView]
    static let fields: [ViewField<Self>] = [
        .field("currency", \.currency), .field("balanceMinor", \.balanceMinor), .field("pendingTopUpsMinor", \.pendingTopUpsMinor),
        .field("items", \.items),
    ]
}

struct WalletEntryView: View {
    let entry: String
    let amountMinor: Int
    let parcelId: UUID?
    let at: Date
    static let fields: [ViewField<Self>] = [
        .field("entry", \.entry, .oneOf(["topped_up", "spent", "returned"])), .field("amountMinor", \.amountMinor),
        .omitted("parcelId", \.parcelId), .field("at", \.at),
    ]
}

/// A top-up as its payer sees it: `pending` while the card is being taken (`requires_action` while its holder is to
/// authenticate it), then `captured` (in the wallet) or `declined`.
struct TopUpView: View {
    let payment: PaymentRecord
    /// While its card's holder is to authenticate it (3-D Secure), as a parcel's payment says.
    var clientSecret: String? { payment.requiresAction ? payment.clientSecret : nil }
    var authenticateBy: Date? { payment.requiresAction ? payment.actionExpiresAt : nil }
    var status: String { payment.requiresAction ? "requires_action" : payment.status == .authorised ? "pending" : payment.status.rawValue }
    static let fields: [ViewField<Self>] = [
        .field("id", \.payment.id), .field("amountMinor", \.payment.amountMinor), .field("currency", \.payment.currency),
        .field("status", \.status, .oneOf(["pending", "requires_action", "captured", "declined"])), .omitted("declineCode", \.payment.declineCode),
        .omitted("clientSecret", \.clientSecret), .omitted("authenticateBy", \.authenticateBy),
        .field("createdAt", \.payment.createdAt), .field("updatedAt", \.payment.updatedAt),
    ]
}
