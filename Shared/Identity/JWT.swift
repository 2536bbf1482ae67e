import Crypto
import Foundation
import HTTP
import Runtime
import Synchronization
import Web

/// The claims of an access token (conventions: `sub`, `sid`, `iat`, `exp`, `iss: "auth"`), or of a stream ticket,
/// which adds `aud: "stream"` and its own id `jti`.
public struct AccessClaims: Codable, Sendable, Equatable {
    /// The user id.
    public var sub: String
    /// The session id.
    public var sid: String
    /// Issued at (Unix seconds).
    public var iat: Int
    /// Expires at (Unix seconds).
    public var exp: Int
    /// Always `auth`.
    public var iss: String
    /// Absent from an access token; `stream` in a stream ticket.
    public var aud: String?
    /// A stream ticket's id (what makes it single-use).
    public var jti: String?

    public init(sub: String, sid: String, iat: Int, exp: Int, iss: String = "auth", aud: String? = nil, jti: String? = nil) {
        self.sub = sub; self.sid = sid; self.iat = iat; self.exp = exp; self.iss = iss; self.aud = aud; self.jti = jti
    }
}

/// Why a token was refused (never shown in detail to clients).
public enum JWTError: Error, Equatable {
    case malformed, unsupportedAlgorithm, unknownKey, badSignature, expired, notYetValid, wrongIssuer, lifetimeTooLong,
         wrongAudience
}

/// EdDSA (Ed25519) JSON Web Tokens.
public enum JWT {
    /// The longest access-token lifetime accepted (15 minutes).
    public static let maxLifetime = 15 * 60
    /// The audience of stream tickets, and their longest lifetime (a minute: a ticket travels in a URL).
    public static let streamAudience = "stream"
    public static let maxTicketLifetime = 60
    /// Clock skew tolerated on `iat` and `exp`.
    public static let leeway = 5

    private struct Header: Codable { var alg: String; var typ: String?; var kid: String? }

    /// Signs `claims` with `key`, naming it `kid` in the header.
    public static func sign(_ claims: AccessClaims, key: Ed25519PrivateKey, kid: String) throws -> String {
        let header = Base64URL.encode(try JSON.encode(Header(alg: "EdDSA", typ: "JWT", kid: kid)))
        let payload = Base64URL.encode(try JSON.encode(claims))
        let signature = try key.sign(Array("\(header).\(payload)".utf8))
        return "\(header).\(payload).\(Base64URL.encode(signature))"
    }

    /// Verifies signature, algorithm, issuer, audience and times; `keys` maps key ids to raw Ed25519 public keys. An
    /// access token has no audience (`audience` nil), so a stream ticket never passes for one, nor the reverse.
    public static func verify(_ token: String, keys: [String: [UInt8]], audience: String? = nil,
                              now: Date = Date()) throws(JWTError) -> AccessClaims {
        guard token.utf8.count < 4096 else { throw .malformed }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
              let headerBytes = Base64URL.decode(parts[0]),
              let payloadBytes = Base64URL.decode(parts[1]),
              let signature = Base64URL.decode(parts[2]),
              let header = try? JSONDecoder().decode(Header.self, from: Data(headerBytes))
        else { throw .malformed }
        guard header.alg == "EdDSA" else { throw .unsupportedAlgorithm }
        let key: [UInt8]
        if let kid = header.kid {
            guard let k = keys[kid] else { throw .unknownKey }
            key = k
        } else {
            guard keys.count == 1, let k = keys.values.first else { throw .unknownKey }
            key = k
        }
        let signed = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard ed25519Verify(publicKey: key, message: signed, signature: signature) else { throw .badSignature }
        guard let claims = try? JSONDecoder().decode(AccessClaims.self, from: Data(payloadBytes)) else { throw .malformed }
        guard claims.aud == audience else { throw .wrongAudience }
        try check(claims, now: now)
        return claims
    }

    /// The checks on claims that depend on the time, repeated for tokens whose signature was verified before.
    public static func check(_ claims: AccessClaims, now: Date = Date()) throws(JWTError) {
        let t = Int(now.timeIntervalSince1970)
        guard claims.iss == "auth" else { throw .wrongIssuer }
        guard claims.exp > t - leeway else { throw .expired }
        guard claims.iat <= t + leeway else { throw .notYetValid }
        guard claims.exp - claims.iat <= (claims.aud == nil ? maxLifetime : maxTicketLifetime) else { throw .lifetimeTooLong }
    }
}

/// Remembers tokens whose signature verified, with the caller they name, so a client's next request with the same
/// token skips the Ed25519 verification (a third of the CPU of an authenticated request) and the parsing of its ids.
/// The times are still checked on every use; changing keys empties it.
///
/// In 16 shards by the token's hash, computed outside the locks, and each shard keyed by that hash: the lock is held
/// for an integer lookup only (all of a benchmark's requests carry one token, so they all meet at one shard), and the
/// token is compared after it is let go.
public final class VerifiedTokens: Sendable {
    private struct Entry: Sendable {
        let token: String
        let claims: AccessClaims
        let caller: Caller
    }
    private let shards = Sharded<[Int: Entry]>(count: 16) { [:] }
    private let capacity: Int

    public init(capacity: Int = 50_000) { self.capacity = max(1, capacity / 16) }

    /// The caller of a token `JWT.verify` accepts, from memory when this exact token verified before (then `keys` is
    /// not even read). A token whose `sub` or `sid` is not a UUID is malformed.
    public func caller(_ token: String, keys: @autoclosure () -> [String: [UInt8]], now: Date = Date()) throws(JWTError) -> Caller {
        let hash = token.hashValue
        if let known = shards.read(hash, { $0[hash] }), known.token == token {
            try JWT.check(known.claims, now: now)
            return known.caller
        }
        let claims = try JWT.verify(token, keys: keys(), now: now)
        guard let user = UUID(uuidString: claims.sub), let session = UUID(uuidString: claims.sid) else { throw .malformed }
        let entry = Entry(token: token, claims: claims, caller: Caller(userId: user, sessionId: session))
        shards.withLock(hash) { entries in
            if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            entries[hash] = entry
        }
        return entry.caller
    }

    /// Forgets everything (after the keys changed).
    public func removeAll() { shards.forEach { $0.removeAll() } }
}

// MARK: - JWKs

/// One public key of a JWK set (`kty: OKP`, `crv: Ed25519`).
public struct JWK: Decodable, View, Sendable, Equatable {
    public var kty = "OKP"
    public var crv = "Ed25519"
    public var alg = "EdDSA"
    public var use = "sig"
    public var kid: String
    public var x: String

    public init(kid: String, publicKey: [UInt8]) { self.kid = kid; self.x = Base64URL.encode(publicKey) }

    public static let fields: [ViewField<Self>] = [
        .field("kty", \.kty, .oneOf(["OKP"])), .field("crv", \.crv, .oneOf(["Ed25519"])), .field("alg", \.alg, .oneOf(["EdDSA"])),
        .field("use", \.use, .oneOf(["sig"])), .field("kid", \.kid), .field("x", \.x),
    ]
}

/// A JWK set `{"keys": [...]}`.
public struct JWKSet: Decodable, View, Sendable {
    public var keys: [JWK]
    public init(keys: [JWK]) { self.keys = keys }

    public static let fields: [ViewField<Self>] = [.field("keys", \.keys)]

    /// Key id → raw public key, for the Ed25519 keys in the set.
    public var publicKeys: [String: [UInt8]] {
        var out: [String: [UInt8]] = [:]
        for k in keys where k.kty == "OKP" && k.crv == "Ed25519" {
            if let raw = Base64URL.decode(k.x), raw.count == 32 { out[k.kid] = raw }
        }
        return out
    }
}

extension StreamTicket {
    /// The ticket `claims` describe, or a 401 when its ids are not UUIDs.
    public init(_ claims: AccessClaims) throws {
        guard let user = UUID(uuidString: claims.sub), let session = UUID(uuidString: claims.sid),
              let id = claims.jti.flatMap(UUID.init(uuidString:)) else { throw HTTPError.unauthenticated() }
        self.init(caller: Caller(userId: user, sessionId: session), id: id, expiresAt: Date(timeIntervalSince1970: TimeInterval(claims.exp)))
    }
}

/// Verifies tokens offline with auth's public keys (fetched from the JWKS URL every minute, and on an unknown key id
/// at most every 5 seconds), and refuses tokens of sessions revoked through `session.revoked`.
public final class TokenVerifier: Authenticator, Sendable {
    private let keys: Mutex<(current: [String: [UInt8]], lastFetch: Date)>
    private let jwksURL: String?
    private let revocations: SessionRevocations?
    private let logger: Logger
    private let verified = VerifiedTokens()

    /// A verifier with fixed keys (from `JWT_PUBLIC_KEY`, or tests).
    public init(keys: [String: [UInt8]], revocations: SessionRevocations?, logger: Logger) {
        self.keys = Mutex((keys, .distantPast)); self.jwksURL = nil; self.revocations = revocations; self.logger = logger
    }

    /// A verifier that fetches keys from `jwksURL`.
    public init(jwksURL: String, revocations: SessionRevocations?, logger: Logger) {
        self.keys = Mutex(([:], .distantPast)); self.jwksURL = jwksURL; self.revocations = revocations; self.logger = logger
    }

    /// Fetches the key set now; false when auth could not be reached.
    @discardableResult
    public func refreshKeys(abandon: (() -> Bool)? = nil) -> Bool {
        guard let jwksURL, let url = URL(string: jwksURL) else { return false }
        keys.withLock { $0.lastFetch = Date() }
        guard let (status, body) = Fetch.get(url, timeout: 3, abandon: abandon), status == 200,
              let set = try? JSONDecoder().decode(JWKSet.self, from: body) else {
            logger.warn("could not fetch the JWK set", ["url": .string(jwksURL)])
            return false
        }
        let changed = keys.withLock { keys in
            defer { keys.current = set.publicKeys }
            return keys.current != set.publicKeys
        }
        if changed { verified.removeAll() }
        return true
    }

    /// Whether keys are loaded.
    public var hasKeys: Bool { keys.withLock { !$0.current.isEmpty } }

    public func authenticate(_ request: Request) throws -> Caller {
        let token = try bearerToken(request)
        let caller = try withKeys { keys throws(JWTError) in try verified.caller(token, keys: keys()) }
        if revocations?.isRevoked(caller.sessionId) == true { throw HTTPError.unauthenticated() }
        return caller
    }

    public func ticket(_ text: String) throws -> StreamTicket {
        let claims = try withKeys { keys throws(JWTError) in try JWT.verify(text, keys: keys(), audience: JWT.streamAudience) }
        let ticket = try StreamTicket(claims)
        if revocations?.isRevoked(ticket.caller.sessionId) == true { throw HTTPError.unauthenticated() }
        return ticket
    }

    /// Runs a check with the keys (read only if it asks), fetching them again when it names a key id not yet known;
    /// any refusal is a 401.
    private func withKeys<T>(_ check: (() -> [String: [UInt8]]) throws(JWTError) -> T) throws -> T {
        // While the revocations are not known, a logged-out token would pass: ask the client to come back.
        if let revocations, !revocations.canCheckTokens { throw HTTPError.unavailable(retryAfter: 1) }
        do {
            return try check(currentKeys)
        } catch .unknownKey {
            // A new key id is looked up at most every 5 s (tokens with made-up ids cannot flood auth); while no key is
            // known at all, every second.
            let stale = keys.withLock { Date().timeIntervalSince($0.lastFetch) > ($0.current.isEmpty ? 1 : 5) }
            guard stale, refreshKeys(), let result = try? check(currentKeys) else { throw HTTPError.unauthenticated() }
            return result
        } catch {
            throw HTTPError.unauthenticated()
        }
    }

    public func end(_ stream: EventStream, whenRevoked caller: Caller) {
        revocations?.end(stream, whenRevoked: caller.sessionId)
    }

    /// The token's signature with the keys already known (a key id not yet known is left to `authenticate`, which
    /// may fetch the keys), its expiry, and the revocations already heard of.
    public func checkHead(_ request: Request) throws {
        let token = try bearerToken(request)
        let caller: Caller
        do {
            caller = try verified.caller(token, keys: currentKeys())
        } catch .unknownKey {
            return
        } catch {
            throw HTTPError.unauthenticated()
        }
        if revocations?.isRevoked(caller.sessionId) == true { throw HTTPError.unauthenticated() }
    }

    private func currentKeys() -> [String: [UInt8]] { keys.withLock { $0.current } }
}
