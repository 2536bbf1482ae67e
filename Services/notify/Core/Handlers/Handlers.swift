import Foundation
import HTTP
import Identity
import Postgres
import Web

/// Notify's handlers: what was sent to me.
struct NotifyHandlers: Sendable {
    let pool: Pool
    let storage: NotifyStorage

    /// `GET /v1/notifications`: what was sent to me and when, the newest first.
    func list(_ request: Request, _ caller: Caller) throws -> Response {
        let page = try Page(request)
        let before = try page.after.map { values -> UUID in
            guard values.count == 1, let id = UUID(uuidString: values[0]) else { throw HTTPError.validation("cursor is not valid.", field: "cursor") }
            return id
        }
        return try pool.withConnection { c in
            let rows = try storage.deliveries(c, of: caller.userId, before: before, limit: page.limit + 1)
            return .json(PageResponse(rows, page, item: DeliveryView.init, cursor: { [$0.id.lowercased] }))
        }
    }
}
