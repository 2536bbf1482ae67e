import Crypto
import Foundation
import Models
import HTTP
import Postgres
import Push
import Runtime
import Web

/// The VAPID keys: the current one, which clients subscribe with, and during a rotation the previous one, which
/// still signs for the subscriptions made with it until their clients subscribe again with the new key.
struct PushKeys: Sendable {
    let current: VAPID
    let previous: VAPID?

    func key(for publicKey: String) -> VAPID? {
        [current, previous].compactMap { $0 }.first { $0.publicKey == publicKey }
    }
}

/// The push services a subscription may name (`PUSH_ALLOWED_ORIGINS`): origins, a host's first label may be `*`
/// (`https://*.push.apple.com`) and a port `*` (`http://127.0.0.1:*`). Anything else is refused, so that a
/// subscription cannot make notify call into a private network.
struct AllowedOrigins: Sendable {
    struct Pattern: Sendable {
        let scheme: String
        let host: String
        let port: Int?  // nil: any
    }
    let patterns: [Pattern]

    /// The browsers' push services: Chrome and Edge (FCM), Firefox (Mozilla), Safari (Apple), Windows (WNS).
    static let browsers = "https://fcm.googleapis.com,https://updates.push.services.mozilla.com,https://*.push.apple.com,https://*.notify.windows.com"

    init(_ text: String) throws {
        patterns = try text.split(separator: ",").map { item in
            let origin = item.trimmingCharacters(in: .whitespaces)
            let anyPort = origin.hasSuffix(":*")
            guard let url = URL(string: anyPort ? String(origin.dropLast(2)) : origin.replacingOccurrences(of: "://*.", with: "://wildcard.")),
                  let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme), let host = url.host?.lowercased(),
                  url.path.isEmpty || url.path == "/", url.query == nil, url.user == nil else {
                throw ConfigError(variable: "PUSH_ALLOWED_ORIGINS", problem: "\"\(origin)\" is not an origin such as https://fcm.googleapis.com")
            }
            let port = anyPort ? nil : (url.port ?? (scheme == "https" ? 443 : 80))
            return Pattern(scheme: scheme, host: host.hasPrefix("wildcard.") ? "*" + host.dropFirst("wildcard".count) : host, port: port)
        }
        guard !patterns.isEmpty else { throw ConfigError(variable: "PUSH_ALLOWED_ORIGINS", problem: "names no origin") }
    }

    func allows(_ url: URL) -> Bool {
        guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased(), url.user == nil, url.password == nil else { return false }
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        return patterns.contains { p in
            p.scheme == scheme && (p.port == nil || p.port == port)
                && (p.host.hasPrefix("*.") ? host.hasSuffix(p.host.dropFirst()) && host.count > p.host.count - 1 : host == p.host)
        }
    }
}

/// `POST /v1/push/subscriptions`: the `PushSubscription` JSON a browser's `toJSON()` gives.
struct PushSubscriptionBody: RequestBody {
    static let schema = Schema.object([
        "endpoint": .required(.string(min: 1, max: 2048)),
        "expirationTime": .optional(.number(0...1e15)),
        "keys": .required(.object(["p256dh": .required(.string(min: 1, max: 128)), "auth": .required(.string(min: 1, max: 64))])),
    ])
    let endpoint: String
    let expirationTime: Double?
    let keys: Keys

    struct Keys: Decodable, Sendable {
        let p256dh: String
        let auth: String
    }
}

struct PreferenceBody: RequestBody {
    static let schema = Schema.object(["enabled": .required(.boolean)])
    let enabled: Bool
}

struct QuietHoursBody: RequestBody {
    static let schema = Schema.object([
        "from": .required(.string(pattern: "^([01][0-9]|2[0-3]):[0-5][0-9]$", rule: "a time of day, HH:MM")),
        "to": .required(.string(pattern: "^([01][0-9]|2[0-3]):[0-5][0-9]$", rule: "a time of day, HH:MM")),
        "timeZone": .required(.string(min: 1, max: 64)),
    ])
    let from: String
    let to: String
    let timeZone: String
}

/// Registering and removing push subscriptions.
struct Subscriptions: Sendable {
    let storage: NotifyStorage
    let keys: PushKeys
    let allowed: AllowedOrigins

    /// Enough for every device a person has.
    static let maxPerPerson = 20

    func subscribe(_ c: Connection, user: UUID, _ body: PushSubscriptionBody) throws -> SubscriptionRecord {
        guard let url = URL(string: body.endpoint), url.fragment == nil, allowed.allows(url) else {
            throw NotifyError.invalid("endpoint is not one of the push services this server sends to.", field: "endpoint")
        }
        guard let point = Base64URL.decode(body.keys.p256dh), point.count == 65, (try? P256PrivateKey().sharedSecret(with: point)) != nil else {
            throw NotifyError.invalid("keys.p256dh is not a P-256 public key (65 bytes, base64url).", field: "keys.p256dh")
        }
        guard let secret = Base64URL.decode(body.keys.auth), secret.count == 16 else {
            throw NotifyError.invalid("keys.auth is not a 16-byte secret in base64url.", field: "keys.auth")
        }
        let expires = body.expirationTime.map { Date(timeIntervalSince1970: $0 / 1000) }
        if let expires, expires <= Date() { throw NotifyError.invalid("expirationTime has passed.", field: "expirationTime") }
        try c.execute("SELECT pg_advisory_xact_lock(hashtext('notify.push_subscriptions'), hashtext(\(user.lowercased)))")
        let known = try storage.subscriptions(c, of: user)
        if !known.contains(where: { $0.endpoint == body.endpoint }) && known.count >= Self.maxPerPerson {
            throw NotifyError.conflict("You have \(Self.maxPerPerson) push subscriptions already: remove one first.")
        }
        return try storage.subscribe(c, id: UUID.v7(), user: user, endpoint: body.endpoint, p256dh: Base64URL.encode(point),
                                     auth: Base64URL.encode(secret), vapidKey: keys.current.publicKey, expiresAt: expires)
    }
}

/// What people may turn off, by kind and channel (a verification or reset mail cannot be). Channel `app`: the app's
/// list of notices (`GET /v1/notifications`).
enum Preferences {
    static let choices: [(kind: String, channel: String)] = [
        ("reminder", "push"), ("parcel_step", "push"), ("parcel_offer", "push"), ("chat_message", "push"), ("chat_mention", "push"),
        ("newsletter", "email"),
        ("newsletter_ready", "push"), ("newsletter_ready", "app"), ("story_comment", "push"), ("story_comment", "app"),
        ("group_stories_digest", "push"), ("group_stories_digest", "app"),
    ]

    /// The kinds among the choices, each once, in their order.
    static let kinds = choices.map(\.kind).reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }
}

/// Quiet hours: from `starts` to `ends` (minutes of the day, wrapping past midnight) in `timeZone`, pushes wait, but
/// for a courier's offer, which is worth nothing later.
enum QuietHours {
    /// When the quiet hours around `now` end; nil when `now` is not in them.
    static func end(starts: Int, ends: Int, timeZone: String, now: Date = Date()) -> Date? {
        guard starts != ends, let zone = TimeZone(identifier: timeZone) else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let parts = calendar.dateComponents([.hour, .minute], from: now)
        let minute = (parts.hour ?? 0) * 60 + (parts.minute ?? 0)
        let quiet = starts < ends ? (starts..<ends).contains(minute) : minute >= starts || minute < ends
        guard quiet else { return nil }
        return calendar.nextDate(after: now, matching: DateComponents(hour: ends / 60, minute: ends % 60, second: 0), matchingPolicy: .nextTime)
    }

    /// `HH:MM` as minutes of the day.
    static func minutes(_ text: String) -> Int? {
        let parts = text.split(separator: ":").compactMap { Int($0) }
        guard text.count == 5, parts.count == 2, (0..<24).contains(parts[0]), (0..<60).contains(parts[1]) else { return nil }
        return parts[0] * 60 + parts[1]
    }

    static func text(_ minutes: Int) -> String { String(format: "%02d:%02d", minutes / 60, minutes % 60) }
}
