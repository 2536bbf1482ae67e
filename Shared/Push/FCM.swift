import Crypto
import Foundation

/// Firebase Cloud Messaging's HTTP v1 API (firebase.google.com/docs/cloud-messaging/send/v1-api), authorised by
/// OAuth 2.0 for a service account (RFC 7523: a signed JWT exchanged for an access token).
public enum FCM {
    public static let url = "https://fcm.googleapis.com"
    /// The scope an access token must carry to send.
    public static let scope = "https://www.googleapis.com/auth/firebase.messaging"
}

/// The service account JSON Google gives (`type`, `project_id`, `private_key_id`, `private_key`, `client_email`,
/// `token_uri`); its key signs the assertions (RS256).
public struct FCMServiceAccount: Sendable {
    public let projectId: String
    public let clientEmail: String
    public let keyId: String?
    public let tokenURI: String
    public let key: JWSSigningKey

    /// The account of `json`; the error names what is missing or wrong.
    public init(json: String) throws {
        guard let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] else {
            throw PushClientError("is not a JSON object (the service account file Google gives)")
        }
        func field(_ name: String) throws -> String {
            guard let value = object[name] as? String, !value.isEmpty else { throw PushClientError("has no \(name)") }
            return value
        }
        projectId = try field("project_id")
        clientEmail = try field("client_email")
        keyId = object["private_key_id"] as? String
        tokenURI = (object["token_uri"] as? String) ?? "https://oauth2.googleapis.com/token"
        guard let key = try? JWSSigningKey(pem: try field("private_key")), key.algorithm == .rs256 else {
            throw PushClientError("has a private_key that is not an RSA private key in PEM")
        }
        self.key = key
    }
}

/// The access token to send with, from the token endpoint (`tokenURL`, default the account's `token_uri`): an RS256
/// assertion (`iss` the account, `scope` messaging, `aud` the token endpoint, an hour at most) exchanged for a
/// token, kept until a minute before it expires and shared by every sender loop.
///
/// `@unchecked Sendable`: the cached token and the connection are used under `lock` only.
public final class FCMTokens: @unchecked Sendable {
    public let account: FCMServiceAccount
    private let tokenURL: String
    private let connection: HTTP2Connection
    private let lock = NSLock()
    private var current: (token: String, until: Date)?

    public init(account: FCMServiceAccount, tokenURL: String? = nil, timeout: Int = 10) throws {
        self.account = account
        self.tokenURL = tokenURL ?? account.tokenURI
        connection = try HTTP2Connection(timeout: timeout, cleartextHTTP2: false)
    }

    /// The cached access token, or a new one (nil with why, when the endpoint gave none).
    public func token(now: Date = Date()) -> Result<String, PushClientError> {
        lock.lock()
        defer { lock.unlock() }
        if let current, current.until > now { return .success(current.token) }
        let iat = Int(now.timeIntervalSince1970)
        let assertion: String
        do {
            assertion = try account.key.jwt(header: account.keyId.map { ["typ": "JWT", "kid": $0] } ?? ["typ": "JWT"],
                                            claims: ["iss": account.clientEmail, "scope": FCM.scope, "aud": tokenURL, "iat": iat, "exp": iat + 3600])
        } catch {
            return .failure(PushClientError("the assertion could not be signed: \(error)"))
        }
        let form = "grant_type=" + "urn:ietf:params:oauth:grant-type:jwt-bearer".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            + "&assertion=" + assertion
        switch connection.send("POST", tokenURL, headers: ["content-type": "application/x-www-form-urlencoded"], body: Array(form.utf8)) {
        case .failure(let error):
            return .failure(PushClientError("the token endpoint did not answer: \(error)"))
        case .success(let answer):
            guard answer.status == 200, let json = try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any],
                  let token = json["access_token"] as? String else {
                return .failure(PushClientError("the token endpoint answered \(answer.status): \(String(decoding: answer.body.prefix(300), as: UTF8.self))"))
            }
            let lifetime = (json["expires_in"] as? Int).map(TimeInterval.init) ?? 3600
            current = (token, now.addingTimeInterval(max(0, lifetime - 60)))
            return .success(token)
        }
    }

    /// The endpoint refused `token` (401): the next message gets a new one.
    public func expire(_ token: String) {
        lock.lock()
        defer { lock.unlock() }
        if current?.token == token { current = nil }
    }
}

/// Sends FCM messages over one connection (HTTP/2 to Google), with the access tokens of `tokens`. One sender loop
/// holds one client.
public final class FCMClient: Sendable {
    private let sendURL: String
    private let tokens: FCMTokens
    private let connection: HTTP2Connection

    public init(url: String = FCM.url, tokens: FCMTokens, timeout: Int = 10) throws {
        sendURL = (url.hasSuffix("/") ? String(url.dropLast()) : url) + "/v1/projects/\(tokens.account.projectId)/messages:send"
        self.tokens = tokens
        connection = try HTTP2Connection(timeout: timeout, cleartextHTTP2: false)
    }

    /// What FCM made of `message` (the `{"message": {...}}` body): 200 accepted; 404 `UNREGISTERED`, 400
    /// `INVALID_ARGUMENT` about the token, and 403 `SENDER_ID_MISMATCH`: the token is gone; 401 a new access token
    /// and once more at once; 429 and 5xx again later (after `Retry-After`); anything else refused.
    public func send(_ message: [UInt8]) -> PushOutcome {
        var outcome = PushOutcome.rejected("not sent")
        for _ in 0..<2 {
            let token: String
            switch tokens.token() {
            case .success(let t): token = t
            case .failure(let error): return .retry("\(error)", retryAfter: nil)
            }
            switch connection.send("POST", sendURL, headers: ["authorization": "Bearer \(token)", "content-type": "application/json; charset=utf-8"],
                                   body: message) {
            case .failure(let error):
                return .retry("FCM did not answer: \(error)", retryAfter: nil)
            case .success(let answer):
                let error = (try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any])?["error"] as? [String: Any]
                let status = error?["status"] as? String ?? ""
                let said = "FCM answered \(answer.status) \(status): \(error?["message"] as? String ?? "")"
                let text = String(decoding: answer.body, as: UTF8.self)
                switch answer.status {
                case 200: return .accepted
                case 404 where status == "NOT_FOUND" || text.contains("UNREGISTERED"): return .gone
                case 400 where status == "INVALID_ARGUMENT" && (text.contains("message.token") || text.contains("registration token")): return .gone
                case 403 where text.contains("SENDER_ID_MISMATCH"): return .gone
                case 401:
                    tokens.expire(token)
                    outcome = .retry(said, retryAfter: nil)
                    continue
                case 429, 500...599: return .retry(said, retryAfter: answer.retryAfter)
                default: return .rejected(said)
                }
            }
        }
        return outcome
    }
}
