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
    /// nil with neither APNs nor FCM set up.
    let devices: Devices?

    /// `GET /v1/notifications`: what was sent to me and when, the newest first.
    func list(_ context: Context<Caller>) throws -> Response {
        let page = try Page(context.request)
        let before = try page.after.map { values -> UUID in
            guard values.count == 1, let id = UUID(uuidString: values[0]) else { throw HTTPError.validation("cursor is not valid.", field: "cursor") }
            return id
        }
        let channel = context.request.query["channel"], unread = context.request.query["unread"] == "true"
        return try pool.withConnection { c in
            let rows = try storage.deliveries(c, of: context.caller.userId, before: before, limit: page.limit + 1, channel: channel, unread: unread)
            return .json(PageResponse(rows, page, item: DeliveryView.init, cursor: { [$0.id.lowercased] }))
        }
    }

    /// `POST /v1/notifications/{id}/read`: this notice read (its pushes with it); another person's is not found.
    func markRead(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        guard let delivery = try pool.withConnection({ try storage.markRead($0, id, user: context.caller.userId) }) else {
            throw HTTPError.notFound()
        }
        return .json(DeliveryView(delivery))
    }

    /// `POST /v1/notifications/read`: everything shown to me so far read.
    func markAllRead(_ context: Context<Caller>) throws -> Response {
        _ = try pool.withConnection { try storage.markAllRead($0, user: context.caller.userId) }
        return .noContent
    }
}

/// Push subscriptions: the key to subscribe with, and mine to register, list and remove.
extension NotifyHandlers {
    private func pushing() throws -> Subscriptions {
        guard let subscriptions else { throw HTTPError.notFound("Web Push is not set up on this server.") }
        return subscriptions
    }

    /// `GET /v1/push/key`
    func pushKey(_ context: Context<Caller>) throws -> Response {
        .json(PushKeyView(publicKey: try pushing().keys.current.publicKey))
    }

    /// `GET /v1/push/subscriptions`
    func subscriptions(_ context: Context<Caller>) throws -> Response {
        _ = try pushing()
        return .json(ItemList(try pool.withConnection { try storage.subscriptions($0, of: context.caller.userId) }.map(SubscriptionView.init)))
    }

    /// `POST /v1/push/subscriptions`
    func subscribe(_ context: Context<Caller>, _ body: PushSubscriptionBody) throws -> Response {
        let pushing = try pushing()
        let record = try pool.withTransaction { try pushing.subscribe($0, user: context.caller.userId, body) }
        return .json(SubscriptionView(record), status: 201)
    }

    /// `DELETE /v1/push/subscriptions/{id}`
    func unsubscribe(_ context: Context<Caller>) throws -> Response {
        _ = try pushing()
        let id = try context.parameters.require("id", as: UUID.self)
        guard try pool.withTransaction({ try storage.unsubscribe($0, id, user: context.caller.userId) }) else { throw HTTPError.notFound() }
        return .noContent
    }
}

/// Native devices (APNs, FCM): mine to register, list and remove.
extension NotifyHandlers {
    private func native() throws -> Devices {
        guard let devices else { throw HTTPError.notFound("Native push is not set up on this server.") }
        return devices
    }

    /// `GET /v1/push/devices`
    func devices(_ context: Context<Caller>) throws -> Response {
        _ = try native()
        return .json(ItemList(try pool.withConnection { try storage.devices($0, of: context.caller.userId) }.map(DeviceView.init)))
    }

    /// `POST /v1/push/devices`: 201 for a new token, 200 for one known already (now mine, with these details).
    func registerDevice(_ context: Context<Caller>, _ body: DeviceBody) throws -> Response {
        let devices = try native()
        let (device, created) = try pool.withTransaction { try devices.register($0, user: context.caller.userId, body) }
        return .json(DeviceView(device), status: created ? 201 : 200)
    }

    /// `DELETE /v1/push/devices/{id}`
    func removeDevice(_ context: Context<Caller>) throws -> Response {
        _ = try native()
        let id = try context.parameters.require("id", as: UUID.self)
        guard try pool.withTransaction({ try storage.removeDevice($0, id, user: context.caller.userId) }) else { throw HTTPError.notFound() }
        return .noContent
    }
}

/// Preferences, quiet hours, and the unsubscribe links in mails.
extension NotifyHandlers {
    /// `GET /v1/notifications/preferences`: every choice, on unless I turned it off.
    func preferences(_ context: Context<Caller>) throws -> Response {
        let mine = try pool.withConnection { try storage.preferences($0, of: context.caller.userId) }
        return .json(ItemList(Preferences.choices.map { PreferenceView(kind: $0.kind, channel: $0.channel, enabled: mine["\($0.kind)/\($0.channel)"] ?? true) }))
    }

    /// `PUT /v1/notifications/preferences/{kind}/{channel}`
    func setPreference(_ context: Context<Caller>, _ body: PreferenceBody) throws -> Response {
        let kind = try context.parameters.require("kind"), channel = try context.parameters.require("channel")
        guard Preferences.choices.contains(where: { $0.kind == kind && $0.channel == channel }) else { throw HTTPError.notFound() }
        try pool.withTransaction { try storage.setPreference($0, context.caller.userId, kind: kind, channel: channel, enabled: body.enabled) }
        return .json(PreferenceView(kind: kind, channel: channel, enabled: body.enabled))
    }

    /// `GET /v1/notifications/quiet-hours`
    func quietHours(_ context: Context<Caller>) throws -> Response {
        guard let q = try pool.withConnection({ try storage.quietHours($0, of: context.caller.userId) }) else { throw HTTPError.notFound("You have no quiet hours.") }
        return .json(QuietHoursView(from: QuietHours.text(q.starts), to: QuietHours.text(q.ends), timeZone: q.timeZone))
    }

    /// `PUT /v1/notifications/quiet-hours`
    func setQuietHours(_ context: Context<Caller>, _ body: QuietHoursBody) throws -> Response {
        guard let starts = QuietHours.minutes(body.from) else { throw HTTPError.validation("from must be a time of day, HH:MM.", field: "from") }
        guard let ends = QuietHours.minutes(body.to) else { throw HTTPError.validation("to must be a time of day, HH:MM.", field: "to") }
        guard starts != ends else { throw HTTPError.validation("from and to must differ.", field: "to") }
        guard TimeZone(identifier: body.timeZone) != nil, body.timeZone.contains("/") || body.timeZone == "UTC" else {
            throw HTTPError.validation("timeZone must be an IANA time zone such as Europe/Berlin.", field: "timeZone")
        }
        try pool.withConnection { try storage.setQuietHours($0, of: context.caller.userId, (starts, ends, body.timeZone)) }
        return .json(QuietHoursView(from: body.from, to: body.to, timeZone: body.timeZone))
    }

    /// `DELETE /v1/notifications/quiet-hours`
    func clearQuietHours(_ context: Context<Caller>) throws -> Response {
        try pool.withConnection { try storage.setQuietHours($0, of: context.caller.userId, nil) }
        return .noContent
    }

    /// `GET /v1/notifications/unsubscribe?token=`: a page whose button posts the one-click unsubscribe (opening a
    /// link unsubscribes nobody: mail scanners open links).
    func unsubscribePage(_ context: Context<Void>) throws -> Response {
        let token = try Self.linkToken(context.request)
        guard let target = try pool.withConnection({ try storage.unsubscribeTarget($0, token: token) }) else {
            return HTML.page("This link no longer works", "<p>Change what you receive in the app's settings.</p>")
        }
        return HTML.page("Unsubscribe", """
            <p>Stop receiving \(Self.describe(target.kind)) by \(target.channel == "email" ? "e-mail" : "push")?</p>
            <form method="post" action="/v1/notifications/unsubscribe?token=\(token)"><button type="submit">Unsubscribe</button></form>
            """)
    }

    /// `POST /v1/notifications/unsubscribe?token=`: turned off, without signing in (RFC 8058). Sent again, it says so
    /// again; once the choice was turned back on, the link no longer works (`setPreference` dropped its token).
    func unsubscribeByLink(_ context: Context<Void>) throws -> Response {
        let token = try Self.linkToken(context.request)
        let done = try pool.withTransaction { c -> Bool in
            guard let target = try storage.unsubscribeTarget(c, token: token, locking: true) else { return false }
            try storage.setPreference(c, target.user, kind: target.kind, channel: target.channel, enabled: false)
            return true
        }
        return done ? HTML.page("You are unsubscribed", "<p>You can turn it on again in the app's settings.</p>")
            : HTML.page("This link no longer works", "<p>Change what you receive in the app's settings.</p>")
    }

    private static func linkToken(_ request: Request) throws -> String {
        let token = request.query["token"] ?? ""
        guard token.utf8.count <= 64, token.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }) else {
            throw HTTPError.validation("token is not one a mail carried.", field: "token")
        }
        return token
    }

    private static func describe(_ kind: String) -> String {
        ["newsletter": "your groups' newsletters", "reminder": "reminders to post", "parcel_step": "parcel updates",
         "parcel_offer": "delivery offers", "chat_message": "new chat messages", "chat_mention": "mentions in chats",
         "newsletter_ready": "word that your groups' newsletters are ready", "story_comment": "comments on your stories",
         "group_stories_digest": "daily digests of your groups' new stories"][kind] ?? "these notifications"
    }
}
