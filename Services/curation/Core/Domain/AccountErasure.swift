import Events
import Features
import Foundation
import Models
import Postgres

/// What curation does when an account is erased (`user.deleted`): the person's likes, watching history, comments,
/// playlists, preferences and recommendation scrolls go, and so do their name and face.
struct AccountErasure: Sendable {
    func userDeleted(_ event: ReceivedEvent, _ c: Connection) throws {
        let user = try event.decode(UserDeleted.self).userId
        for (table, column) in [("likes", "user_id"), ("watches", "user_id"), ("comments", "author_id"), ("playlists", "owner_id"),
                                ("preferences", "user_id"), ("scrolls", "user_id")] {
            try c.execute("DELETE FROM curation.\(unescaped: table) WHERE \(unescaped: column) = \(user)")
        }
        try Profiles(schema: "curation").forget(user, on: c)
        try Blocks(schema: "curation").forget(user, on: c)
        try Reports(schema: "curation").forget(user, on: c)
        try Erasure.forget(user, schema: "curation", on: c)
    }
}
