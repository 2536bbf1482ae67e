import Foundation
import Models
import Postgres

extension DispatchStorage {
    /// The parcels, locked, still waiting for a recipient whose sender is not `user` and whose claim code nobody used:
    /// those naming `username` booked since `usernameSince`, and those naming `email` (nil: none) booked since
    /// `emailSince`.
    func parcelsNaming(_ c: Connection, username: String, since usernameSince: Date, email: String?, since emailSince: Date,
                       notSentBy user: UUID) throws -> [ParcelRecord] {
        try c.rows("""
            SELECT * FROM dispatch.parcels
            WHERE recipient_user_id IS NULL AND sender_id <> $5 AND status NOT IN ('received', 'cancelled', 'failed')
              AND ((recipient_username IS NOT NULL AND lower(recipient_username) = lower($1) AND created_at >= $2)
                   OR (recipient_email IS NOT NULL AND lower(recipient_email) = lower($3) AND created_at >= $4))
            ORDER BY id FOR UPDATE
            """, [username, usernameSince, email, emailSince, user]).map(ParcelRecord.init)
    }
}
