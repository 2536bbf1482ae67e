import Events
import Foundation
import Models
import Postgres
import Web

/// Loyalty points: a sender earns one for each whole unit of currency a delivered parcel cost them, and spends them
/// against a price, one point for one minor unit; a parcel that is cancelled or fails gives its points back. Every
/// change is one row of an append-only ledger, at most one of a kind per parcel, and one `loyalty.recorded` event.
struct Loyalty: Sendable {
    let outbox: Outbox

    /// What the rules refuse.
    enum Refused: DomainError, Equatable {
        case notEnough(balance: Int)
        var refusal: Refusal { .invalid }
        var field: String? { "pointsToSpend" }
        var message: String {
            switch self { case .notEnough(let balance): return "You have \(balance) points." }
        }
    }

    /// `user`'s points now. `lock`: held until the transaction ends, so that two bookings cannot spend them twice.
    func balance(_ c: Connection, _ user: UUID, lock: Bool = false) throws -> Int {
        if lock { try c.execute("SELECT pg_advisory_xact_lock(hashtext('dispatch.loyalty'), hashtext(\(user.lowercased)))") }
        return try c.first("""
            SELECT coalesce(sum(CASE WHEN entry = 'spent' THEN -points ELSE points END), 0)::int AS balance
            FROM dispatch.loyalty_ledger WHERE user_id = \(user)
            """)!["balance"]
    }

    /// Takes `points` of `user`'s for a booking priced `price` (minor units): the points used, at most the price
    /// less `keep` (what a card must still pay: the provider charges no less).
    func spend(_ c: Connection, _ user: UUID, points: Int, price: Int, keep: Int) throws -> Int {
        guard points > 0 else { return 0 }
        let balance = try self.balance(c, user, lock: true)
        guard points <= balance else { throw Refused.notEnough(balance: balance) }
        return min(points, max(0, price - keep))
    }

    /// The least a card pays: Stripe's minimum charge (50 cents in euros, and about that in the other currencies).
    static let cardMinimumMinor = 50

    /// Writes the spending of a parcel booked with `points`.
    func spent(_ c: Connection, _ parcel: ParcelRecord) throws {
        if parcel.pointsSpent > 0 { try record(c, parcel.senderId, parcel.id, .spent, parcel.pointsSpent) }
    }

    /// What a parcel's move means for its sender's points: earned when it reached its recipient (or their centre),
    /// given back when it was called off or failed.
    func follow(_ c: Connection, _ parcel: ParcelRecord, _ action: ParcelAction) throws {
        switch action {
        case .deliver, .handOver, .leaveAtCentre:
            let earned = parcel.quote.amountMinor / 100
            if earned > 0 { try record(c, parcel.senderId, parcel.id, .earned, earned) }
        case .cancel, .paymentDeclined, .fail:
            if parcel.pointsSpent > 0 { try record(c, parcel.senderId, parcel.id, .returned, parcel.pointsSpent) }
        default: break
        }
    }

    private func record(_ c: Connection, _ user: UUID, _ parcel: UUID, _ entry: LoyaltyEntry, _ points: Int) throws {
        guard let r = try c.first("""
            INSERT INTO dispatch.loyalty_ledger (user_id, parcel_id, entry, points) VALUES (\(user), \(parcel), \(entry.rawValue), \(points))
            ON CONFLICT (parcel_id, entry) DO NOTHING RETURNING id, at
            """) else { return }  // once per parcel
        try outbox.add(LoyaltyRecorded(entryId: try r["id"], userId: user, parcelId: parcel, entry: entry,
                                       points: points, at: try r["at"]),
                       subject: user.lowercased, on: c)
    }

    /// `user`'s balance and their latest `limit` entries, the newest first.
    func statement(_ c: Connection, _ user: UUID, limit: Int) throws -> LoyaltyView {
        let entries = try c.rows("""
            SELECT entry, points, parcel_id, at FROM dispatch.loyalty_ledger WHERE user_id = \(user) ORDER BY id DESC LIMIT \(limit)
            """).map { r in
            LoyaltyEntryView(entry: try r["entry"], points: try r["points"], parcelId: try r["parcel_id"], at: try r["at"])
        }
        return LoyaltyView(balance: try balance(c, user), items: entries)
    }
}

struct LoyaltyView: View {
    let balance: Int
    let items: [LoyaltyEntryView]
    static let fields: [ViewField<Self>] = [.field("balance", \.balance), .field("items", \.items)]
}

struct LoyaltyEntryView: View {
    let entry: String
    let points: Int
    let parcelId: UUID
    let at: Date
    static let fields: [ViewField<Self>] = [
        .field("entry", \.entry, .oneOf(["earned", "spent", "returned"])), .field("points", \.points), .field("parcelId", \.parcelId),
        .field("at", \.at),
    ]
}
