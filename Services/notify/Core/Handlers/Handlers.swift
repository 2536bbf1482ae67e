import Foundation
import HTTP
import Identity
import Postgres
import Web

/// Notify's handlers: what was sent to me, and my push subscriptions.
struct NotifyHandlers: Sendable {
    let pool: Pool
    let storage: NotifyStorage
    /// nil without VAPID_PRIVATE_KEY.
    let subscriptions: Subscriptions?

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

/// Push subscriptions: the key to subscribe with, and mine to register, list and remove.
extension NotifyHandlers {
    private func pushing() throws -> Subscriptions {
        guard let subscriptions else { throw HTTPError.notFound("Web Push is not set up on this server.") }
        return subscriptions
    }

    /// `GET /v1/push/key`
    func pushKey(_ request: Request, _ caller: Caller) throws -> Response {
        .json(PushKeyView(publicKey: try pushing().keys.current.publicKey))
    }

    /// `GET /v1/push/subscriptions`
    func subscriptions(_ request: Request, _ caller: Caller) throws -> Response {
        _ = try pushing()
        return .json(ItemList(try pool.withConnection { try storage.subscriptions($0, of: caller.userId) }.map(SubscriptionView.init)))
    }

    /// `POST /v1/push/subscriptions`
    func subscribe(_ request: Request, _ caller: Caller, _ body: PushSubscriptionBody) throws -> Response {
        let pushing = try pushing()
        let record = try pool.withTransaction { try pushing.subscribe($0, user: caller.userId, body) }
        return .json(SubscriptionView(record), status: 201)
    }

    /// `DELETE /v1/push/subscriptions/{id}`
    func unsubscribe(_ request: Request, _ caller: Caller) throws -> Response {
        _ = try pushing()
        guard let id = UUID(uuidString: request.pathParameters["id"] ?? ""),
              try pool.withTransaction({ try storage.unsubscribe($0, id, user: caller.userId) }) else { throw HTTPError.notFound() }
        return .noContent
    }
}
