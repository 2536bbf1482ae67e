import Crypto
import Foundation
import Identity
import Runtime
import Web
import XCTest

final class JWTTests: XCTestCase {
    let key = try! Ed25519PrivateKey()
    var keys: [String: [UInt8]] { ["k1": key.publicKey] }
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    func claims(iat: Int? = nil, lifetime: Int = 900) -> AccessClaims {
        let t = iat ?? Int(now.timeIntervalSince1970)
        return AccessClaims(sub: UUID().uuidString.lowercased(), sid: UUID().uuidString.lowercased(), iat: t, exp: t + lifetime)
    }

    func testASignedTokenVerifiesToItsClaims() throws {
        let c = claims()
        let token = try JWT.sign(c, key: key, kid: "k1")
        XCTAssertEqual(try JWT.verify(token, keys: keys, now: now), c)
    }

    func testATamperedSignatureOrPayloadIsRefused() throws {
        let token = try JWT.sign(claims(), key: key, kid: "k1")
        var parts = token.split(separator: ".").map(String.init)
        var signature = Base64URL.decode(parts[2])!
        signature[0] ^= 1
        parts[2] = Base64URL.encode(signature)
        XCTAssertThrowsError(try JWT.verify(parts.joined(separator: "."), keys: keys, now: now)) {
            XCTAssertEqual($0 as? JWTError, .badSignature)
        }
        var other = claims()
        other.sub = UUID().uuidString.lowercased()
        let forged = token.split(separator: ".")[0] + "." + Base64URL.encode(Array(try JSONEncoder().encode(other))) + "." + token.split(separator: ".")[2]
        XCTAssertThrowsError(try JWT.verify(String(forged), keys: keys, now: now)) { XCTAssertEqual($0 as? JWTError, .badSignature) }
    }

    func testAlgNoneIsRefused() throws {
        let header = Base64URL.encode(Array(#"{"alg":"none","typ":"JWT","kid":"k1"}"#.utf8))
        let payload = Base64URL.encode(Array(try JSONEncoder().encode(claims())))
        for token in ["\(header).\(payload).", "\(header).\(payload)"] {
            XCTAssertThrowsError(try JWT.verify(token, keys: keys, now: now))
        }
        XCTAssertThrowsError(try JWT.verify("\(header).\(payload).", keys: keys, now: now)) {
            XCTAssertEqual($0 as? JWTError, .unsupportedAlgorithm)
        }
    }

    func testATokenSignedWithAnotherKeyIsRefused() throws {
        let other = try Ed25519PrivateKey()
        let token = try JWT.sign(claims(), key: other, kid: "k1")
        XCTAssertThrowsError(try JWT.verify(token, keys: keys, now: now)) { XCTAssertEqual($0 as? JWTError, .badSignature) }
        let unknown = try JWT.sign(claims(), key: key, kid: "k2")
        XCTAssertThrowsError(try JWT.verify(unknown, keys: keys, now: now)) { XCTAssertEqual($0 as? JWTError, .unknownKey) }
    }

    func testExpiredFutureAndOverlongTokensAreRefused() throws {
        let t = Int(now.timeIntervalSince1970)
        let expired = try JWT.sign(claims(iat: t - 1000), key: key, kid: "k1")
        XCTAssertThrowsError(try JWT.verify(expired, keys: keys, now: now)) { XCTAssertEqual($0 as? JWTError, .expired) }
        let future = try JWT.sign(claims(iat: t + 60), key: key, kid: "k1")
        XCTAssertThrowsError(try JWT.verify(future, keys: keys, now: now)) { XCTAssertEqual($0 as? JWTError, .notYetValid) }
        let long = try JWT.sign(claims(lifetime: 3600), key: key, kid: "k1")
        XCTAssertThrowsError(try JWT.verify(long, keys: keys, now: now)) { XCTAssertEqual($0 as? JWTError, .lifetimeTooLong) }
        var wrongIssuer = claims(); wrongIssuer.iss = "evil"
        XCTAssertThrowsError(try JWT.verify(try JWT.sign(wrongIssuer, key: key, kid: "k1"), keys: keys, now: now)) {
            XCTAssertEqual($0 as? JWTError, .wrongIssuer)
        }
    }

    func testAStreamTicketAndAnAccessTokenNeverPassForEachOther() throws {
        var ticket = claims(lifetime: JWT.maxTicketLifetime)
        ticket.aud = JWT.streamAudience; ticket.jti = UUID().uuidString.lowercased()
        let signedTicket = try JWT.sign(ticket, key: key, kid: "k1")
        XCTAssertEqual(try JWT.verify(signedTicket, keys: keys, audience: JWT.streamAudience, now: now), ticket)
        XCTAssertThrowsError(try JWT.verify(signedTicket, keys: keys, now: now)) { XCTAssertEqual($0 as? JWTError, .wrongAudience) }
        let token = try JWT.sign(claims(), key: key, kid: "k1")
        XCTAssertThrowsError(try JWT.verify(token, keys: keys, audience: JWT.streamAudience, now: now)) {
            XCTAssertEqual($0 as? JWTError, .wrongAudience)
        }
        XCTAssertThrowsError(try VerifiedTokens().caller(signedTicket, keys: keys, now: now), "nor through the verified tokens' memory")
        var long = ticket; long.exp = long.iat + JWT.maxTicketLifetime + 1
        XCTAssertThrowsError(try JWT.verify(try JWT.sign(long, key: key, kid: "k1"), keys: keys, audience: JWT.streamAudience, now: now)) {
            XCTAssertEqual($0 as? JWTError, .lifetimeTooLong, "a ticket lives a minute at most")
        }
    }

    func testGarbageIsMalformed() {
        for token in ["", "a.b", "a.b.c", "....", String(repeating: "x", count: 5000), "e30.e30.AAAA"] {
            XCTAssertThrowsError(try JWT.verify(token, keys: keys, now: now), token.prefix(20).description)
        }
    }

    func testVerifiedTokensSkipTheSignatureButNotTheClock() throws {
        let cache = VerifiedTokens(capacity: 16)  // one a shard
        let c = claims()
        let caller = Caller(userId: UUID(uuidString: c.sub)!, sessionId: UUID(uuidString: c.sid)!)
        let token = try JWT.sign(c, key: key, kid: "k1")
        XCTAssertEqual(try cache.caller(token, keys: keys, now: now), caller)
        XCTAssertEqual(try cache.caller(token, keys: [:], now: now), caller, "a known token needs no key")
        XCTAssertThrowsError(try cache.caller(token, keys: keys, now: now.addingTimeInterval(3600))) {
            XCTAssertEqual($0 as? JWTError, .expired, "but it still expires")
        }
        let forged = String(token.dropLast(2)) + (token.hasSuffix("AA") ? "BA" : "AA")
        XCTAssertThrowsError(try cache.caller(forged, keys: keys, now: now)) { XCTAssertEqual($0 as? JWTError, .badSignature) }
        let notIds = try JWT.sign(AccessClaims(sub: "admin", sid: "x", iat: c.iat, exp: c.exp), key: key, kid: "k1")
        XCTAssertThrowsError(try cache.caller(notIds, keys: keys, now: now)) { XCTAssertEqual($0 as? JWTError, .malformed) }
        // 300 others: that none falls in the token's shard has a chance of (15/16)^300, 4e-9.
        for _ in 0..<300 { _ = try cache.caller(try JWT.sign(claims(), key: key, kid: "k1"), keys: keys, now: now) }
        XCTAssertThrowsError(try cache.caller(token, keys: [:], now: now), "evicted at capacity, so verified again")
    }

    func testJWKSetRoundTripsTheRawKey() throws {
        let set = JWKSet(keys: [JWK(kid: "k1", publicKey: key.publicKey)])
        let decoded = try JSONDecoder().decode(JWKSet.self, from: Data(JSON.encode(set)))
        XCTAssertEqual(decoded.publicKeys, ["k1": key.publicKey])
    }
}

final class CryptoTests: XCTestCase {
    func testBase64URLRoundTripsAndRejectsJunk() {
        for n in 0..<40 {
            let bytes = secureRandomBytes(n)
            XCTAssertEqual(Base64URL.decode(Base64URL.encode(bytes)), bytes)
        }
        XCTAssertEqual(Base64URL.encode(Array("hi?>".utf8)), "aGk_Pg")
        XCTAssertNil(Base64URL.decode("a"))
        XCTAssertNil(Base64URL.decode("ab+/"))
        XCTAssertNil(Base64URL.decode("ab c"))
    }

    func testArgon2idHashesVerifyOnlyTheirPassword() throws {
        let hash = try PasswordHasher.hash("correct horse battery")
        XCTAssertTrue(hash.hasPrefix("$argon2id$v=19$m=19456,t=2,p=1$"))
        XCTAssertTrue(try PasswordHasher.verify("correct horse battery", encoded: hash))
        XCTAssertFalse(try PasswordHasher.verify("correct horse batterY", encoded: hash))
        XCTAssertFalse(try PasswordHasher.verify("x", encoded: "not a hash"))
        XCTAssertNotEqual(try PasswordHasher.hash("same"), try PasswordHasher.hash("same"), "salted")
    }

    func testSHA256KnownAnswer() {
        XCTAssertEqual(hexString(sha256(Array("abc".utf8))), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }
}

final class TraceContextTests: XCTestCase {
    func testTraceparentIsReadAsW3CDefinesVersion00() {
        let t = TraceContext(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
        XCTAssertEqual(t?.traceId, "4bf92f3577b34da6a3ce929d0e0e4736")
        XCTAssertEqual(t?.traceparent, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
        let child = t?.child()
        XCTAssertEqual(child?.traceId, t?.traceId)
        XCTAssertNotEqual(child?.spanId, t?.spanId)
        for bad in ["", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                    "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
                    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01"] {
            XCTAssertNil(TraceContext(traceparent: bad), bad)
        }
        XCTAssertNotNil(TraceContext(traceparent: TraceContext.start().traceparent))
    }

    func testTheCurrentTraceIsTheThreadsAndIsRestoredAfterwards() {
        let outer = TraceContext.start(), inner = TraceContext.start()
        XCTAssertNil(TraceContext.current)
        TraceContext.with(outer) {
            XCTAssertEqual(TraceContext.current, outer)
            TraceContext.with(inner) { XCTAssertEqual(TraceContext.current, inner) }
            XCTAssertEqual(TraceContext.current, outer)
            let checked = DispatchSemaphore(value: 0)
            Thread { XCTAssertNil(TraceContext.current, "another thread has its own"); checked.signal() }.start()
            checked.wait()
        }
        XCTAssertNil(TraceContext.current)
    }
}
