import Events
import Features
import Foundation
import Models
import Postgres

/// What dispatch does when an account is erased (`user.deleted`). Parcels are records of a sale and stay as long as
/// the law asks (`docs/privacy.md`), anonymised: the erased sender or recipient is nobody (`Erasure.nobody`, or no
/// recipient), their names, phone, e-mail and addresses go and their end of the route is rounded to about a
/// kilometre; an erased courier is nobody on the parcels they carried and in their history. Their photos (their
/// identity document's too), courier record, application and its history, name and face go.
struct AccountErasure: Sendable {
    let parcels: Parcels
    let media: MediaStore

    func userDeleted(_ event: ReceivedEvent, _ c: Connection) throws {
        let user = try event.decode(UserDeleted.self).userId
        let nobody = Erasure.nobody
        try c.execute("""
            UPDATE dispatch.parcels SET sender_id = \(nobody), pickup_address = '', pickup_lat = round(pickup_lat::numeric, 2),
                pickup_lon = round(pickup_lon::numeric, 2), description = NULL, claim_code = NULL,
                recipient_name = '', recipient_phone = NULL, recipient_email = NULL, recipient_username = NULL, dropoff_address = ''
            WHERE sender_id = \(user)
            """)
        try c.execute("""
            UPDATE dispatch.parcels SET recipient_user_id = NULL, claim_code = NULL, recipient_name = '', recipient_phone = NULL,
                recipient_email = NULL, recipient_username = NULL, dropoff_address = '', dropoff_lat = round(dropoff_lat::numeric, 2),
                dropoff_lon = round(dropoff_lon::numeric, 2)
            WHERE recipient_user_id = \(user)
            """)
        // An offer open to them lapses, as one nobody answered does; what they had not picked up goes to another.
        try parcels.release(c, from: user)
        try c.execute("UPDATE dispatch.parcels SET courier_id = \(nobody) WHERE courier_id = \(user)")
        try c.execute("UPDATE dispatch.parcel_history SET actor_id = NULL WHERE actor_id = \(user)")
        // Payments are records of the sale too: they stay, paid by nobody (the append-only ledger names no payer).
        try c.execute("UPDATE dispatch.payments SET payer_id = \(nobody), card_payment_method = NULL WHERE payer_id = \(user)")
        try c.execute("UPDATE dispatch.receipts SET payer_id = \(nobody) WHERE payer_id = \(user)")
        try c.execute("UPDATE dispatch.refunds SET payer_id = \(nobody) WHERE payer_id = \(user)")
        try c.execute("UPDATE dispatch.courier_earnings SET courier_id = \(nobody) WHERE courier_id = \(user)")
        // A plan stops renewing; its wallet and plan entries go (the payment ledger keeps the money).
        try c.execute("""
            UPDATE dispatch.subscriptions SET user_id = \(nobody), card_payment_method = NULL, provider_customer = NULL, renews = false,
                updated_at = now()
            WHERE user_id = \(user)
            """)
        try c.execute("SELECT pg_notify(\(DispatchStorage.erasedChannel), user_id::text) FROM dispatch.couriers WHERE user_id = \(user)")
        for (table, column) in [("parcel_declines", "courier_id"), ("couriers", "user_id"), ("claim_failures", "user_id"),
                                ("centre_staff", "user_id"), ("loyalty_ledger", "user_id"), ("wallet_ledger", "user_id"),
                                ("plan_ledger", "user_id"), ("courier_applications", "user_id"),
                                ("courier_vetting_history", "user_id")] {
            try c.execute("DELETE FROM dispatch.\(unescaped: table) WHERE \(unescaped: column) = \(user)")
        }
        try media.forget(owner: user, on: c)
        try Profiles(schema: "dispatch").forget(user, on: c)
        try Erasure.forget(user, schema: "dispatch", on: c)
    }
}
