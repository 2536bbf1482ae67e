import Foundation
import Models
import Postgres

extension DispatchStorage {
    /// The parcels, locked, still waiting for a recipient whose sender is not `user` and whose claim code nobody used:
    /// those naming `username` booked since `usernameSince`, and those naming `email` (nil: none) booked since
    /// `emailSince`.
    func parcelsNaming(_ c: Connection, username: String, since usernameSince: Date, email: String?, since emailSince: Date,
                       notSentBy user: UUID) throws -> [ParcelRecord] {
        try c.all(ParcelRecord.self, """
            SELECT \(ParcelRecord.columns) FROM dispatch.parcels
            WHERE recipient_user_id IS NULL AND sender_id <> \(user) AND status NOT IN ('received', 'cancelled', 'failed')
              AND ((recipient_username IS NOT NULL AND lower(recipient_username) = lower(\(username)) AND created_at >= \(usernameSince))
                   OR (recipient_email IS NOT NULL AND lower(recipient_email) = lower(\(email)) AND created_at >= \(emailSince)))
            ORDER BY id FOR UPDATE
            """)
    }
}
