import Crypto
import Foundation
import HTTP
import Models
import Postgres
import Push
import Runtime
import Web

/// The apps one backend serves, as a device registers for one of them, and which app each kind of notification
/// belongs to: a person's notices reach the devices of that app only (a parcel's step is not shown by the chat app).
enum Apps {
    static let all = ["tapestry", "mesajem", "chat", "youstudy"]

    static func of(kind: String) -> String {
        switch kind {
        case "parcel_offer", "parcel_step", "payment_action": return "mesajem"
        case "chat_message", "chat_mention": return "chat"
        default: return "tapestry"  // reminders, newsletters
        }
    }
}

/// `POST /v1/push/devices`: an app's installation, as Parse's were: the provider's token, the app, and (APNs) the
/// environment the build belongs to.
struct DeviceBody: RequestBody {
    static let schema = Schema.object([
        "platform": .required(.oneOf(["apns", "fcm"])),
        "token": .required(.string(min: 1, max: 4096)),
        "app": .required(.oneOf(Apps.all)),
        "environment": .optional(.oneOf(["production", "sandbox"])),
        "locale": .optional(.string(min: 2, max: 35, pattern: "^[A-Za-z]{2,3}([-_][A-Za-z0-9]{1,8})*$", rule: "a language tag such as fr-FR")),
        "timeZone": .optional(.string(min: 1, max: 64)),
    ])
    let platform: String
    let token: String
    let app: String
    let environment: String?
    let locale: String?
    let timeZone: String?
}

/// Registering and removing native devices (APNs, FCM).
struct Devices: Sendable {
    let storage: NotifyStorage
    /// The apps APNs sends for, with their bundle ids (`APNS_TOPICS`); nil: APNs is off.
    let apnsTopics: [String: String]?
    /// FCM is on.
    let fcm: Bool

    /// Enough for every phone and tablet a person has; past it, the device registered least recently is dropped
    /// (an app registers at each launch, so that is the one longest unused: a reinstalled app's old token).
    static let maxPerPerson = 20

    /// Registers `body` for `user`: the record, and whether it is new (false: the token was known, and is now
    /// `user`'s, with these details). A token moved from someone else takes none of their notices with it.
    func register(_ c: Connection, user: UUID, _ body: DeviceBody) throws -> (device: DeviceRecord, created: Bool) {
        var token = body.token
        switch body.platform {
        case "apns":
            guard let topics = apnsTopics else { throw NotifyError.invalid("APNs is not set up on this server.", field: "platform") }
            guard topics[body.app] != nil else { throw NotifyError.invalid("This server sends no APNs notifications for \(body.app).", field: "app") }
            guard (64...200).contains(token.count), token.allSatisfy(\.isHexDigit) else {
                throw NotifyError.invalid("token must be the APNs device token in hexadecimal (64 characters or more).", field: "token")
            }
            token = token.lowercased()
        default:
            guard fcm else { throw NotifyError.invalid("FCM is not set up on this server.", field: "platform") }
            guard token.count >= 32, token.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_:".contains($0)) }) else {
                throw NotifyError.invalid("token must be an FCM registration token.", field: "token")
            }
            guard body.environment == nil else { throw NotifyError.invalid("environment is for APNs tokens only.", field: "environment") }
        }
        if let zone = body.timeZone, TimeZone(identifier: zone) == nil || !(zone.contains("/") || zone == "UTC") {
            throw NotifyError.invalid("timeZone must be an IANA time zone such as Europe/Berlin.", field: "timeZone")
        }
        try c.execute("SELECT pg_advisory_xact_lock(hashtext('notify.push_devices'), hashtext(\(user.lowercased)))")
        let result = try storage.registerDevice(c, id: UUID.v7(), user: user, platform: body.platform, token: token, app: body.app,
                                                environment: body.platform == "apns" ? body.environment ?? "production" : nil,
                                                locale: body.locale, timeZone: body.timeZone)
        try storage.keepNewestDevices(c, of: user, Self.maxPerPerson)
        return result
    }
}

/// Native push: APNs and FCM, each on when configured; what a delivery says, in each provider's form.
struct NativePush: Sendable {
    struct APNsSettings: Sendable {
        let tokens: APNsTokens
        let productionURL: String
        let sandboxURL: String
        let caFile: String?
        /// app → bundle id (`apns-topic`).
        let topics: [String: String]
    }
    struct FCMSettings: Sendable {
        let tokens: FCMTokens
        let url: String
    }
    let apns: APNsSettings?
    let fcm: FCMSettings?

    /// A sender loop's connections: one to each provider that is on.
    struct Clients: Sendable {
        let apns: APNsClient?
        let fcm: FCMClient?
    }

    func clients(timeout: Int) throws -> Clients {
        Clients(apns: try apns.map {
                    try APNsClient(productionURL: $0.productionURL, sandboxURL: $0.sandboxURL, tokens: $0.tokens, timeout: timeout, caFile: $0.caFile)
                },
                fcm: try fcm.map { try FCMClient(url: $0.url, tokens: $0.tokens, timeout: timeout) })
    }

    /// Sends delivery `d` (its `bodyText` the notice's JSON, `{kind, title, body, url, data}`) to `device`.
    func send(_ d: DeliveryRecord, to device: DeviceRecord, _ clients: Clients) -> PushOutcome {
        guard let json = try? JSONSerialization.jsonObject(with: Data((d.bodyText ?? "").utf8)) as? [String: Any] else {
            return .rejected("nothing to send")
        }
        let notice = Payload(json)
        let expires = d.expiresAt ?? Date().addingTimeInterval(TimeInterval(d.ttl ?? 86_400))
        switch device.platform {
        case "apns":
            guard let apns, let client = clients.apns else { return .rejected("APNs is not set up") }
            guard let topic = apns.topics[device.app] else { return .rejected("no APNs bundle id for \(device.app)") }
            guard let payload = try? JSONSerialization.data(withJSONObject: notice.apns, options: [.sortedKeys, .withoutEscapingSlashes]) else {
                return .rejected("the payload could not be written")
            }
            return client.send(APNsMessage(deviceToken: device.token, sandbox: device.environment == "sandbox", topic: topic, payload: Array(payload),
                                           priority: d.urgency == "high" ? 10 : 5, expiration: expires, collapseId: d.topic,
                                           id: d.id.uuidString))
        case "fcm":
            guard let client = clients.fcm else { return .rejected("FCM is not set up") }
            let ttl = max(0, min(d.ttl ?? 86_400, Int(expires.timeIntervalSinceNow)))
            guard let body = try? JSONSerialization.data(withJSONObject: ["message": notice.fcm(token: device.token, ttl: ttl, high: d.urgency == "high",
                                                                                                 collapse: d.topic)],
                                                         options: [.sortedKeys, .withoutEscapingSlashes]) else {
                return .rejected("the message could not be written")
            }
            return client.send(Array(body))
        default:
            return .rejected("an unknown platform")
        }
    }

    /// A notice as the providers carry it: the English text, and keys the app localises it by (its own strings
    /// files: `<kind>.title` and `<kind>.body`, a parcel's step `parcel_step.<status>.…`), so a phone shows it in its
    /// person's language.
    struct Payload {
        let kind: String
        let title: String
        let body: String
        let url: String
        let data: [String: String]

        init(_ json: [String: Any]) {
            kind = json["kind"] as? String ?? ""
            title = json["title"] as? String ?? ""
            body = json["body"] as? String ?? ""
            url = json["url"] as? String ?? ""
            data = (json["data"] as? [String: Any] ?? [:]).compactMapValues { $0 as? String }
        }

        var locKey: String { kind == "parcel_step" ? "parcel_step.\(data["status"] ?? "")" : kind }
        /// The unread count of a room, the stories a digest or newsletter tells of; nothing else is filled into a text.
        var locArgs: [String] {
            kind == "chat_message" ? [data["unread"] ?? "0"] : data["stories"].map { [$0] } ?? []
        }
        /// What the app groups it with: the parcel, the room, the group.
        var thread: String? { data["parcelId"] ?? data["roomId"] ?? data["groupId"] }

        var apns: [String: Any] {
            var alert: [String: Any] = ["title": title, "body": body]
            // A prompt is in the person's language already; the app's strings would replace it.
            if data["prompt"] == nil { alert["loc-key"] = locKey + ".body"; alert["loc-args"] = locArgs }
            // A room's title is its own name, not a text to translate.
            if kind != "chat_message" { alert["title-loc-key"] = locKey + ".title" }
            var aps: [String: Any] = ["alert": alert, "sound": "default"]
            if let thread { aps["thread-id"] = thread }
            if kind == "parcel_offer" { aps["interruption-level"] = "time-sensitive" }
            return ["aps": aps, "kind": kind, "url": url, "data": data]
        }

        func fcm(token: String, ttl: Int, high: Bool, collapse: String?) -> [String: Any] {
            var notification: [String: Any] = ["title": title, "body": body]
            if data["prompt"] == nil { notification["body_loc_key"] = locKey + ".body"; notification["body_loc_args"] = locArgs }
            if kind != "chat_message" { notification["title_loc_key"] = locKey + ".title" }
            var android: [String: Any] = ["priority": high ? "high" : "normal", "ttl": "\(ttl)s"]
            if let collapse { android["collapse_key"] = collapse; notification["tag"] = collapse }
            android["notification"] = notification
            return ["token": token, "android": android, "data": data.merging(["kind": kind, "url": url]) { a, _ in a }]
        }
    }
}

extension NativePush {
    /// The providers from the settings. APNs: `APNS_PRIVATE_KEY` (the `.p8` file's PEM), `APNS_KEY_ID`,
    /// `APNS_TEAM_ID`, `APNS_TOPICS` (`app=bundle.id` pairs, comma-separated), `APNS_URL` and `APNS_SANDBOX_URL`
    /// (Apple's hosts; `http://` for a stand-in speaking HTTP/2 with prior knowledge), `APNS_CA_FILE` (the
    /// certificates to trust instead of the system's: a stand-in's). FCM: `FCM_SERVICE_ACCOUNT`
    /// (the service account JSON, or the path of its file), `FCM_URL`, `FCM_TOKEN_URL` (default the account's
    /// `token_uri`). A provider none of whose settings is given is off; one given in part, or malformed, is an error.
    init(_ environment: Environment, timeout: Int) throws {
        func url(_ name: String, default value: String) throws -> String {
            let text = environment.string(name, default: value)
            guard let url = URL(string: text), ["http", "https"].contains(url.scheme ?? ""), url.host != nil, url.query == nil else {
                throw ConfigError(variable: name, problem: "must be an http(s) URL such as \(value)")
            }
            return text.hasSuffix("/") ? String(text.dropLast()) : text
        }
        let apnsNames = ["APNS_PRIVATE_KEY", "APNS_KEY_ID", "APNS_TEAM_ID", "APNS_TOPICS"]
        if let given = apnsNames.first(where: { environment.optional($0) != nil }) {
            func required(_ name: String) throws -> String {
                guard let value = environment.optional(name) else { throw ConfigError(variable: name, problem: "must be set with \(given)") }
                return value
            }
            let id = try Regex("^[A-Z0-9]{10}$")
            let keyId = try required("APNS_KEY_ID"), teamId = try required("APNS_TEAM_ID")
            guard keyId.wholeMatch(of: id) != nil else { throw ConfigError(variable: "APNS_KEY_ID", problem: "must be the key's 10-character id") }
            guard teamId.wholeMatch(of: id) != nil else { throw ConfigError(variable: "APNS_TEAM_ID", problem: "must be the team's 10-character id") }
            guard let key = try? JWSSigningKey(pem: try required("APNS_PRIVATE_KEY")), key.algorithm == .es256 else {
                throw ConfigError(variable: "APNS_PRIVATE_KEY", problem: "must be the .p8 file's PEM (a PKCS#8 P-256 private key)")
            }
            func caFile() throws -> String? {
                guard let path = environment.optional("APNS_CA_FILE") else { return nil }
                guard FileManager.default.isReadableFile(atPath: path) else {
                    throw ConfigError(variable: "APNS_CA_FILE", problem: "must be a readable file of PEM certificates")
                }
                return path
            }
            var topics: [String: String] = [:]
            for pair in try required("APNS_TOPICS").split(separator: ",") {
                let parts = pair.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                guard parts.count == 2, Apps.all.contains(parts[0]), parts[1].wholeMatch(of: try Regex("^[A-Za-z0-9-]+(\\.[A-Za-z0-9-]+)+$")) != nil else {
                    throw ConfigError(variable: "APNS_TOPICS",
                                      problem: "must be app=bundle.id pairs, the apps among \(Apps.all.joined(separator: ", ")) (got \"\(pair)\")")
                }
                topics[parts[0]] = parts[1]
            }
            apns = APNsSettings(tokens: try APNsTokens(teamId: teamId, keyId: keyId, key: key),
                                productionURL: try url("APNS_URL", default: APNs.productionURL),
                                sandboxURL: try url("APNS_SANDBOX_URL", default: APNs.sandboxURL), caFile: try caFile(), topics: topics)
        } else {
            apns = nil
        }
        if var json = environment.optional("FCM_SERVICE_ACCOUNT") {
            if !json.hasPrefix("{") {
                guard let text = try? String(contentsOfFile: json, encoding: .utf8) else {
                    throw ConfigError(variable: "FCM_SERVICE_ACCOUNT", problem: "must be the service account JSON, or the path of a file holding it")
                }
                json = text
            }
            let account: FCMServiceAccount
            do { account = try FCMServiceAccount(json: json) } catch {
                throw ConfigError(variable: "FCM_SERVICE_ACCOUNT", problem: "\(error)")
            }
            let tokenURL = try environment.optional("FCM_TOKEN_URL").map { _ in try url("FCM_TOKEN_URL", default: account.tokenURI) }
            fcm = FCMSettings(tokens: try FCMTokens(account: account, tokenURL: tokenURL, timeout: timeout),
                              url: try url("FCM_URL", default: FCM.url))
        } else {
            fcm = nil
        }
    }
}
