import Events
import Foundation
import Models
import Postgres

extension Parcels {
    /// How far auth's clock may be ahead of this database's: a person who registered or took a username up to this long
    /// after a booking by this database's clock still counts as named by it (the name was free a moment before, so
    /// the sender can only have meant them). An address counts only when it was proven before the booking, as at
    /// booking time (`create`).
    static let clockSkew: TimeInterval = 1

    /// A `user.registered` or `user.updated`: the parcels booked for this person while dispatch had not heard of them
    /// (a recipient named by username a moment after signing up, or by an address they had proved) become theirs,
    /// each announced by `parcel.claimed`, as a claim by code is. Dispatch resolves on the event rather than asking auth
    /// at booking: a booking never waits on another service, and whatever order the events arrive in, the recipient
    /// sees the parcel as soon as dispatch hears of them. Only the name or proven address the person held when the
    /// parcel was booked counts: one registered, renamed or proven later was not the one the sender named, so a parcel
    /// named for nobody is never handed to whoever takes the name afterwards; it waits for its claim code.
    func resolveRecipients(_ c: Connection, _ event: ReceivedEvent) throws {
        let (user, username, email, verified, held): (UUID, String, String, Bool, Date)
        if event.type == UserUpdated.type, let u = try? event.decode(UserUpdated.self) {
            (user, username, email, verified, held) = (u.userId, u.username, u.email, u.emailVerified ?? false, u.updatedAt)
        } else if event.type == UserRegistered.type, let u = try? event.decode(UserRegistered.self) {
            (user, username, email, verified, held) = (u.userId, u.username, u.email, u.emailVerified ?? false, u.createdAt)
        } else { return }
        let named = try storage.parcelsNaming(c, username: username, since: held.addingTimeInterval(-Self.clockSkew),
                                              email: verified ? email : nil, since: held, notSentBy: user)
        for var parcel in named {
            parcel.recipientUserId = user
            try storage.save(c, parcel)
            try outbox.add(ParcelClaimed(parcelId: parcel.id, senderId: parcel.senderId,
                                         recipientUserId: user, claimedAt: Date()),
                           subject: parcel.id.lowercased, on: c)
        }
    }
}
