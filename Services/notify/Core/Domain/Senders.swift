import Crypto
import Events
import Features
import Foundation
import HTTP
import Mail
import Models
import Postgres
import Push
import Runtime

/// Sends the mail that is due: `workers` loops side by side, each with a connection of its own, so a slow exchange
/// holds up only its own loop. A delivery taken is leased for the exchange's bound: after a kill, only the ones in
/// flight are sent again (with the same Message-ID, which mail clients fold into one).
struct MailSender: Sendable {
    let pool: Pool
    let storage: NotifyStorage
    let settings: SMTPSettings
    /// Who each mail is from: the app it speaks as, or the backend.
    let from: MailSenders
    let bounce: String
    /// Where newsletters are fetched from, and the origin one-click unsubscribe links point at.
    let newsletters: NewsletterCopies?
    let base: String
    let metrics: Metrics
    let logger: Logger

    func services(workers: Int) throws -> [Job] {
        try senderLoops("mail-sender", workers: workers, idle: 0.5, logger: logger, client: { try SMTPClient(settings) }, round: round)
    }

    /// Sends the next due delivery; how many it took (0 or 1). One at a time: a lease covers one exchange, so a slow
    /// server cannot outlast the lease of a delivery still waiting in a batch (another loop would send it again).
    func round(_ client: SMTPClient) throws -> Int {
        let due = try pool.withTransaction { try storage.claimDue($0, channel: "email", limit: 1, lease: Double(settings.timeout + 45)) }
        for delivery in due { try send(delivery, client) }
        return due.count
    }

    private func send(_ d: DeliveryRecord, _ client: SMTPClient) throws {
        var outcome = "sent"
        do {
            guard (d.expiresAt ?? .distantFuture) > Date() else { throw MailError.permanent("it expired before it could be sent") }
            var (subject, text, html, unsubscribe) = (d.subject, d.bodyText, d.bodyHTML, String?.none)
            if d.kind == "newsletter" {
                guard let newsletters, let reference = d.reference else { throw MailError.permanent("STORIES_URL is not set: no newsletter to fetch") }
                let copy = try newsletters.copy(reference, for: d.userId)
                (subject, text, html) = (copy.subject, copy.text, copy.html)
                let token = try pool.withConnection {
                    try storage.unsubscribeToken($0, d.userId, kind: "newsletter", channel: "email", fresh: Base64URL.encode(secureRandomBytes(24)))
                }
                unsubscribe = base + "/v1/notifications/unsubscribe?token=" + token
            }
            guard let text else { throw MailError.permanent("nothing left to send") }
            let sender = from.of(d.app)
            let message = MailMessage(from: sender, envelopeFrom: bounce, to: try MailAddress(d.address), subject: subject, text: text,
                                      html: html, messageId: "<\(d.id.lowercased)@\(sender.address.split(separator: "@").last ?? "localhost")>",
                                      unsubscribe: unsubscribe)
            try client.send(message)
            try pool.withConnection { try storage.markSent($0, d.id) }
        } catch let error as MailError {
            var retry: TimeInterval?
            if case .temporary = error { retry = Deliveries.retryDelay(after: d.attempts) }
            outcome = retry == nil ? "failed" : "retry"
            try pool.withConnection { try storage.markFailed($0, d.id, error: "\(error)", retryIn: retry) }
            logger.warn(retry == nil ? "a mail was given up" : "a mail will be tried again",
                        ["delivery": .string(d.id.lowercased), "kind": .string(d.kind), "attempts": .int(d.attempts), "error": .string("\(error)")])
        }
        metrics.increment("notify_deliveries_total", labels: "channel=\"email\",outcome=\"\(outcome)\"",
                          help: "Deliveries tried, by channel and outcome (sent, retry, failed).")
    }
}

/// A newsletter as the member it is mailed to sees it, from stories (`STORIES_URL`, with the service token): fetched
/// when it is sent, so the log holds no copy, and a member who left the group since gets none.
struct NewsletterCopies: Sendable {
    let base: URL
    let token: String

    func copy(_ newsletter: String, for user: UUID) throws -> (subject: String, text: String, html: String) {
        guard let id = UUID(uuidString: newsletter) else { throw MailError.permanent("not a newsletter id") }
        let url = base.appendingPathComponent("v1/internal/newsletters/\(id.lowercased)/copies/\(user.lowercased)")
        guard let (status, body) = Fetch.get(url, headers: ["Authorization": "Bearer \(token)"], timeout: 10) else {
            throw MailError.temporary("stories did not answer")
        }
        if status == 404 { throw MailError.permanent("no longer a member of the newsletter's group") }
        guard status == 200, let copy = try? JSONSerialization.jsonObject(with: body) as? [String: Any], let subject = copy["subject"] as? String,
              let text = copy["text"] as? String, let html = copy["html"] as? String else {
            throw MailError.temporary("stories answered \(status)")
        }
        return (subject, text, html)
    }
}

/// A chat room as a member would be told of it, from chat (`CHAT_URL`, with the service token).
struct ChatRooms: Sendable {
    let base: URL
    let token: String

    enum Unread { case none, some(title: String, count: Int), unknown }

    func unread(room: String, user: UUID) -> Unread {
        guard let id = UUID(uuidString: room) else { return .none }
        let url = base.appendingPathComponent("v1/internal/rooms/\(id.lowercased)/members/\(user.lowercased)/unread")
        guard let (status, body) = Fetch.get(url, headers: ["Authorization": "Bearer \(token)"], timeout: 5) else { return .unknown }
        if status == 404 { return .none }
        guard status == 200, let json = try? JSONSerialization.jsonObject(with: body) as? [String: Any], let count = json["unread"] as? Int else {
            return .unknown
        }
        return count == 0 ? .none : .some(title: json["title"] as? String ?? "", count: count)
    }
}

/// Sends the push messages that are due, as `MailSender` sends mail: `workers` loops, one delivery at a time each,
/// leased for the exchange's bound: Web Push to a subscription, APNs or FCM to a device. The answer decides what
/// follows (RFC 8030; APNs and FCM mapped to the same outcomes by their clients): sent; the subscription or device
/// is gone (removed, with what waited for it); again later, after `Retry-After` when it says; anything else given up.
struct PushSender: Sendable {
    let pool: Pool
    let storage: NotifyStorage
    /// nil: no Web Push (no VAPID key).
    let keys: PushKeys?
    /// APNs and FCM, each when configured.
    let native: NativePush
    /// Where a room's unread messages are asked for, to tell a member of them (nil: chat messages are not told).
    let rooms: ChatRooms?
    let timeout: Int
    let metrics: Metrics
    let logger: Logger

    func services(workers: Int) throws -> [Job] {
        try senderLoops("push-sender", workers: workers, idle: 0.2, logger: logger,
                        client: { Clients(web: try PushClient(timeout: timeout), native: try native.clients(timeout: timeout)) }, round: round)
    }

    /// A sender loop's own connections: to the push services, and to APNs and FCM.
    struct Clients: Sendable {
        let web: PushClient
        let native: NativePush.Clients
    }

    /// Sends the next due push; how many it took (0 or 1).
    func round(_ client: Clients) throws -> Int {
        // The lease: the exchange's bound (libcurl's timeout), twice over, and a margin for the database.
        let due = try pool.withTransaction { try storage.claimDue($0, channel: "push", limit: 1, lease: Double(2 * timeout + 5)) }
        for delivery in due { try send(delivery, client) }
        return due.count
    }

    private func send(_ d: DeliveryRecord, _ client: Clients) throws {
        var d = d, chatSilent = false
        if d.kind == "chat_message" && d.bodyText == nil {
            // What to say is known only now: nothing, to a member who has read the room since (or left it).
            switch rooms?.unread(room: d.reference ?? "", user: d.userId) {
            case .none?:
                try pool.withConnection { try storage.discard($0, d.id) }
                return
            case .some(let title, let count)?:
                d.bodyText = Notices.unread(room: d.reference ?? "", title: title, unread: count).payload
            case .unknown?:
                chatSilent = true  // tried again later
            case nil:
                d.bodyText = Notices.unread(room: d.reference ?? "", title: "", unread: 0).payload  // no CHAT_URL: "new messages"
            }
        }
        let outcome: PushOutcome
        let quietUntil = d.kind == "parcel_offer" ? nil : try pool.withConnection { try storage.quietHours($0, of: d.userId) }.flatMap {
            QuietHours.end(starts: $0.starts, ends: $0.ends, timeZone: $0.timeZone)
        }
        if chatSilent {
            outcome = .retry("chat did not say what is unread", retryAfter: nil)
        } else if let quietUntil, quietUntil < (d.expiresAt ?? .distantFuture) {
            try pool.withConnection { try storage.postpone($0, d.id, until: quietUntil) }
            return
        } else if quietUntil != nil {
            outcome = .rejected("it would expire before the quiet hours end")
        } else if (d.expiresAt ?? .distantFuture) <= Date() {
            outcome = .rejected("it expired before it could be delivered")
        } else if let subscriptionId = d.subscriptionId, let s = try pool.withConnection({ try storage.subscription($0, subscriptionId) }) {
            outcome = prepare(d, s).map { client.web.send($0) } ?? .rejected("its subscription's keys or VAPID key are not usable")
        } else if let deviceId = d.deviceId, let device = try pool.withConnection({ try storage.device($0, deviceId) }) {
            outcome = native.send(d, to: device, client.native)
        } else {
            outcome = .rejected("unsubscribed")
        }
        var label = "sent"
        try pool.withConnection { c in
            switch outcome {
            case .accepted:
                try storage.markSent(c, d.id)
            case .gone:
                label = "gone"
                if let s = d.subscriptionId { try storage.unsubscribe(c, s, user: nil) }
                if let device = d.deviceId { try storage.removeDevice(c, device, user: nil) }
                try storage.markFailed(c, d.id, error: "the push service no longer knows the \(d.deviceId == nil ? "subscription" : "device"): removed",
                                       retryIn: nil)
            case .retry(let why, let after):
                let backoff = Deliveries.retryDelay(after: d.attempts)
                label = backoff == nil ? "failed" : "retry"
                try storage.markFailed(c, d.id, error: why, retryIn: backoff.map { max($0, min(after ?? 0, 3600)) })
            case .rejected(let why):
                label = "failed"
                try storage.markFailed(c, d.id, error: why, retryIn: nil)
            }
        }
        if label != "sent" {
            logger.warn("a push was not delivered", ["delivery": .string(d.id.lowercased), "kind": .string(d.kind), "outcome": .string(label),
                                                    "attempts": .int(d.attempts), "address": .string(d.address)])
        }
        metrics.increment("notify_deliveries_total", labels: "channel=\"push\",outcome=\"\(label)\"",
                          help: "Deliveries tried, by channel and outcome (sent, retry, failed, gone).")
    }

    /// The encrypted message for `s`, signed with the VAPID key it was made for; nil when that key is no longer
    /// configured or the subscription's keys are not a P-256 point and a 16-byte secret.
    private func prepare(_ d: DeliveryRecord, _ s: SubscriptionRecord) -> PushRequest? {
        guard let vapid = keys?.key(for: s.vapidKey), let endpoint = URL(string: s.endpoint), let p256dh = Base64URL.decode(s.p256dh),
              let auth = Base64URL.decode(s.auth), let body = try? WebPushEncryption.encrypt(Array((d.bodyText ?? "").utf8), p256dh: p256dh, auth: auth),
              let authorization = try? vapid.authorization(for: endpoint) else { return nil }
        let ttl = max(0, min(d.ttl ?? 86_400, Int((d.expiresAt ?? .distantFuture).timeIntervalSinceNow)))
        return PushRequest(endpoint: s.endpoint, body: body, ttl: ttl, urgency: d.urgency ?? "normal", topic: d.topic,
                           authorization: authorization)
    }
}

/// `workers` sending loops named `<name>-<i>`, each with a client (and so a connection) of its own: each does
/// rounds while they find work, then waits `idle` seconds; a database outage is logged and waited out.
private func senderLoops<Client: Sendable>(_ name: String, workers: Int, idle: TimeInterval, logger: Logger, client: () throws -> Client,
                                           round: @escaping @Sendable (Client) throws -> Int) throws -> [Job] {
    try (0..<workers).map { i in
        let client = try client()
        return Job("\(name)-\(i)") { cancellation in
            while cancellation.sleep(idle) {
                do {
                    while !cancellation.isCancelled, try round(client) > 0 {}
                } catch {
                    logger.warn("a sender cannot reach the database; retrying", ["sender": .string(name), "error": .string("\(error)")])
                }
            }
        }
    }
}
