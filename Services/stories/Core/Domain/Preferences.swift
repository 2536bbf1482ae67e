import Foundation
import Postgres
import HTTP
import Web

/// What a member chooses for themselves: how they take each group's newsletter (`off`, in the `app`, or by `email`
/// too, which the notification service delivers; `app` until they choose), and whose stories they would rather not
/// see (gone from their group streams and newsletters, not from anyone else's).
struct Preferences: Sendable {
    let storage: StoriesStorage

    static let deliveries = ["off", "app", "email"]
    /// Hiding is for a few people, and a list that cannot grow without bound.
    static let maxHidden = 1000

    func setDelivery(_ c: Connection, _ group: GroupRecord, user: UUID, _ delivery: String) throws {
        guard group.kind == .group else { throw StoriesError.journal("A journal has no newsletter to deliver.") }
        guard try storage.setNewsletterDelivery(c, group: group.id, user: user, delivery) else { throw StoriesError.notFound }
    }

    /// Hides `author`, someone `user` shares a group with (anyone else is not found); again changes nothing.
    func hide(_ c: Connection, _ author: UUID, from user: UUID) throws {
        guard author != user else { throw HTTPError.validation("You cannot hide your own stories.", field: "userId") }
        guard try storage.shareAGroup(c, user, author) else { throw StoriesError.notFound }
        guard try storage.hiddenCount(c, of: user) < Self.maxHidden else {
            throw StoriesError.journal("You hide \(Self.maxHidden) people already: show someone again first.")
        }
        try storage.hide(c, author, from: user)
    }
}
