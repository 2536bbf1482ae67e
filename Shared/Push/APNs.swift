import Crypto
import Foundation

/// Apple Push Notification service, the provider API over HTTP/2 with token-based authentication
/// (developer.apple.com: "Sending notification requests to APNs", "Establishing a token-based connection").
public enum APNs {
    /// Apple's hosts: production, and the development (sandbox) one a debug build's tokens belong to.
    public static let productionURL = "https://api.push.apple.com"
    public static let sandboxURL = "https://api.sandbox.push.apple.com"
    /// The most a payload may hold (an alert; VoIP's 5 KB is not used here).
    public static let maxPayload = 4096
}

/// The provider token: an ES256 JWT of the team's `.p8` key (header `alg`, `kid` the key id; claims `iss` the team
/// id, `iat`), made once and shared by every connection of the sender, and made anew after `lifetime` (40 minutes):
/// Apple refuses a token older than an hour (`ExpiredProviderToken`), and one renewed more often than every 20
/// minutes (`TooManyProviderTokenUpdates`), so never a token per request.
///
/// `@unchecked Sendable`: the cached token is read and written under `lock` only.
public final class APNsTokens: @unchecked Sendable {
    public let teamId: String
    public let keyId: String
    private let key: JWSSigningKey
    private let lifetime: TimeInterval
    private let lock = NSLock()
    private var current: (token: String, madeAt: Date)?

    /// `key`: the `.p8` file's PEM; `invalidKey` when it is not a P-256 key.
    public init(teamId: String, keyId: String, key: JWSSigningKey, lifetime: TimeInterval = 40 * 60) throws {
        guard key.algorithm == .es256 else { throw CryptoError.invalidKey }
        self.teamId = teamId; self.keyId = keyId; self.key = key; self.lifetime = lifetime
    }

    /// The token to send now: the cached one while it is younger than `lifetime`.
    public func token(now: Date = Date()) throws -> String {
        lock.lock()
        defer { lock.unlock() }
        if let current, now.timeIntervalSince(current.madeAt) < lifetime, now >= current.madeAt { return current.token }
        let token = try key.jwt(header: ["kid": keyId], claims: ["iss": teamId, "iat": Int(now.timeIntervalSince1970)])
        current = (token, now)
        return token
    }

    /// Apple called `token` expired: the next request makes a new one (unless another connection did already).
    public func expire(_ token: String) {
        lock.lock()
        defer { lock.unlock() }
        if current?.token == token { current = nil }
    }
}

/// One notification for one device token.
public struct APNsMessage: Sendable {
    /// The device token, in hexadecimal, as the app registered it.
    public var deviceToken: String
    /// The token belongs to the development environment (a debug build): sent to the sandbox host.
    public var sandbox: Bool
    /// `apns-topic`: the app's bundle id.
    public var topic: String
    /// The JSON payload (`aps` and the app's own keys), at most `APNs.maxPayload` bytes.
    public var payload: [UInt8]
    /// `apns-priority`: 10 at once (wakes the device), 5 as power allows.
    public var priority: Int
    /// `apns-expiration`: after this, Apple stops trying to deliver it (nil: 0, once only).
    public var expiration: Date?
    /// `apns-collapse-id`: a later notification with the same id replaces this one on the device (at most 64 bytes).
    public var collapseId: String?
    /// `apns-id`: a UUID naming it (a retry carries the same one).
    public var id: String?

    public init(deviceToken: String, sandbox: Bool, topic: String, payload: [UInt8], priority: Int, expiration: Date?,
                collapseId: String?, id: String?) {
        self.deviceToken = deviceToken; self.sandbox = sandbox; self.topic = topic; self.payload = payload
        self.priority = priority; self.expiration = expiration; self.collapseId = collapseId; self.id = id
    }
}

/// Sends notifications to APNs over one HTTP/2 connection per host (its `HTTP2Connection`), with the provider token
/// of `tokens`. One sender loop holds one client.
public final class APNsClient: Sendable {
    private let productionURL: String
    private let sandboxURL: String
    private let tokens: APNsTokens
    private let connection: HTTP2Connection

    /// `caFile`: the certificates to trust instead of the system's (a stand-in's own).
    public init(productionURL: String = APNs.productionURL, sandboxURL: String = APNs.sandboxURL, tokens: APNsTokens, timeout: Int = 10,
                caFile: String? = nil) throws {
        self.productionURL = productionURL.hasSuffix("/") ? String(productionURL.dropLast()) : productionURL
        self.sandboxURL = sandboxURL.hasSuffix("/") ? String(sandboxURL.dropLast()) : sandboxURL
        self.tokens = tokens
        connection = try HTTP2Connection(timeout: timeout, caFile: caFile)
    }

    /// What APNs made of `message`: 200 accepted; 410 (`Unregistered`), 400 `BadDeviceToken` or
    /// `DeviceTokenNotForTopic`: the token is gone (forget it); 429 and 5xx again later; an expired provider token is
    /// made anew and the message sent once more at once; anything else refused.
    public func send(_ message: APNsMessage) -> PushOutcome {
        guard message.payload.count <= APNs.maxPayload else { return .rejected("the payload is over \(APNs.maxPayload) bytes") }
        guard message.deviceToken.allSatisfy(\.isHexDigit) else { return .gone }
        var outcome = PushOutcome.rejected("not sent")
        for _ in 0..<2 {
            let token: String
            do { token = try tokens.token() } catch { return .rejected("the provider token could not be signed: \(error)") }
            var headers = ["authorization": "bearer \(token)", "apns-topic": message.topic, "apns-push-type": "alert",
                           "apns-priority": String(message.priority), "content-type": "application/json",
                           "apns-expiration": String(message.expiration.map { max(0, Int($0.timeIntervalSince1970)) } ?? 0)]
            if let collapse = message.collapseId { headers["apns-collapse-id"] = String(collapse.utf8.prefix(64)) ?? collapse }
            if let id = message.id { headers["apns-id"] = id }
            let url = (message.sandbox ? sandboxURL : productionURL) + "/3/device/" + message.deviceToken
            switch connection.send("POST", url, headers: headers, body: message.payload) {
            case .failure(let error):
                return .retry("APNs did not answer: \(error)", retryAfter: nil)
            case .success(let answer):
                let reason = (try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any])?["reason"] as? String ?? ""
                let said = "APNs answered \(answer.status)" + (reason.isEmpty ? "" : " \(reason)")
                switch (answer.status, reason) {
                case (200, _): return .accepted
                case (410, _), (400, "BadDeviceToken"), (400, "DeviceTokenNotForTopic"): return .gone
                case (403, "ExpiredProviderToken"):
                    tokens.expire(token)
                    outcome = .retry(said, retryAfter: nil)
                    continue
                case (429, _), (500...599, _): return .retry(said, retryAfter: answer.retryAfter)
                default: return .rejected(said)
                }
            }
        }
        return outcome
    }
}
