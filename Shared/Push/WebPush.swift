import Crypto
import Foundation

/// The application server's VAPID identity (RFC 8292): an ES256 key and a contact (`mailto:` or `https:`). A push
/// service accepts a message for a subscription only when it is signed by the key the subscription was made with
/// (the browser's `applicationServerKey`).
public struct VAPID: Sendable {
    public let key: P256PrivateKey
    public let subject: String

    /// `privateKey`: the 32-byte scalar in base64url, as `web-push generate-vapid-keys` and `vapid --gen` print it.
    public init(privateKey: String, subject: String) throws {
        guard let raw = Base64URL.decode(privateKey), raw.count == 32 else { throw CryptoError.invalidKey }
        try self.init(key: P256PrivateKey(raw: raw), subject: subject)
    }

    public init(key: P256PrivateKey, subject: String) {
        self.key = key
        self.subject = subject
    }

    /// The public key in base64url (65 bytes, uncompressed): the `applicationServerKey` clients subscribe with.
    public var publicKey: String { Base64URL.encode(key.publicKey) }

    /// The `Authorization` header for a message to `endpoint`: `vapid t=<JWT>, k=<public key>`, the JWT's audience
    /// the endpoint's origin, valid for `lifetime` seconds (RFC 8292 allows at most 24 hours).
    public func authorization(for endpoint: URL, lifetime: TimeInterval = 12 * 3600, now: Date = Date()) throws -> String {
        guard let scheme = endpoint.scheme, let host = endpoint.host else { throw CryptoError.operationFailed("the endpoint has no origin") }
        let audience = scheme + "://" + host + (endpoint.port.map { ":\($0)" } ?? "")
        let header = #"{"typ":"JWT","alg":"ES256"}"#
        let claims = try JSONSerialization.data(withJSONObject: [
            "aud": audience, "exp": Int(now.timeIntervalSince1970 + min(lifetime, 24 * 3600)), "sub": subject,
        ], options: [.sortedKeys, .withoutEscapingSlashes])
        let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims))
        let signature = try key.sign(Array(input.utf8))
        return "vapid t=\(input).\(Base64URL.encode(signature)), k=\(publicKey)"
    }
}

/// Message encryption for Web Push (RFC 8291, `aes128gcm` of RFC 8188): only the subscription's holder can read it.
public enum WebPushEncryption {
    /// The most a payload may hold: a push service takes 4,096 bytes of body, less the header (86 bytes), the tag
    /// (16) and the delimiter (1).
    public static let maxPlaintext = 3993

    /// The encrypted body for a subscription's `p256dh` (65-byte point) and `auth` (16-byte secret), in one record.
    /// `ephemeral` and `salt` are for tests that reproduce a known answer; otherwise both are fresh for each message.
    public static func encrypt(_ plaintext: [UInt8], p256dh: [UInt8], auth: [UInt8], ephemeral: P256PrivateKey? = nil,
                               salt: [UInt8]? = nil) throws -> [UInt8] {
        guard plaintext.count <= maxPlaintext else { throw CryptoError.operationFailed("the payload is over \(maxPlaintext) bytes") }
        guard p256dh.count == 65, auth.count == 16 else { throw CryptoError.invalidKey }
        let local = try ephemeral ?? P256PrivateKey()
        let salt = salt ?? secureRandomBytes(16)
        let shared = try local.sharedSecret(with: p256dh)
        // RFC 8291 §3.4: the input keying material binds both public keys and the subscription's secret.
        let ikm = hkdfSHA256(salt: auth, ikm: shared, info: Array("WebPush: info".utf8) + [0] + p256dh + local.publicKey, length: 32)
        let key = hkdfSHA256(salt: salt, ikm: ikm, info: Array("Content-Encoding: aes128gcm".utf8) + [0], length: 16)
        let nonce = hkdfSHA256(salt: salt, ikm: ikm, info: Array("Content-Encoding: nonce".utf8) + [0], length: 12)
        // One record, the last: the plaintext, then the delimiter 0x02 (RFC 8188 §2).
        let sealed = try AESGCM.seal(plaintext + [2], key: key, nonce: nonce)
        let recordSize = UInt32(4096)
        let header = salt + withUnsafeBytes(of: recordSize.bigEndian, Array.init) + [UInt8(local.publicKey.count)] + local.publicKey
        return header + sealed
    }
}
