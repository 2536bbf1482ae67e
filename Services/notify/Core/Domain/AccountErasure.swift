import Events
import Features
import Foundation
import Models
import Postgres

/// What notify does when an account is erased (`user.deleted`): what was sent to them, and what waited, goes.
struct AccountErasure: Sendable {
    let storage: NotifyStorage

    func userDeleted(_ event: ReceivedEvent, _ c: Connection) throws {
        let user = try event.decode(UserDeleted.self).userId
        try storage.forget(user, on: c)
        try Erasure.forget(user, schema: "notify", on: c)
    }
}
