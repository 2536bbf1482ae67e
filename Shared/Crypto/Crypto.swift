import COpenSSL
import CArgon2
import Foundation
import Synchronization

/// Errors from the crypto wrappers; messages never include key material.
public enum CryptoError: Error, CustomStringConvertible {
    case invalidKey
    case operationFailed(String)

    public var description: String {
        switch self {
        case .invalidKey: return "invalid key"
        case .operationFailed(let what): return "crypto operation failed: \(what)"
        }
    }
}

// MARK: - Random and hashing

/// Cryptographically secure random bytes from OpenSSL's CSPRNG.
public func secureRandomBytes(_ count: Int) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: count)
    let ok = bytes.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32(count)) }
    precondition(ok == 1, "RAND_bytes failed")
    return bytes
}

/// SHA-256 of `bytes`.
public func sha256(_ bytes: [UInt8]) -> [UInt8] {
    var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
    bytes.withUnsafeBufferPointer { input in
        digest.withUnsafeMutableBufferPointer { out in
            _ = SHA256(input.baseAddress, input.count, out.baseAddress)
        }
    }
    return digest
}

/// HMAC-SHA256 of `message` under `key`.
public func hmacSHA256(key: [UInt8], _ message: [UInt8]) -> [UInt8] {
    var mac = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
    var length: UInt32 = 0
    key.withUnsafeBufferPointer { k in
        message.withUnsafeBufferPointer { m in
            mac.withUnsafeMutableBufferPointer { out in
                _ = HMAC(EVP_sha256(), k.baseAddress, Int32(k.count), m.baseAddress, m.count, out.baseAddress, &length)
            }
        }
    }
    return mac
}

/// Lower-case hexadecimal of `bytes`.
public func hexString(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out = [UInt8]()
    out.reserveCapacity(bytes.count * 2)
    for b in bytes { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 15)]) }
    return String(decoding: out, as: UTF8.self)
}

/// Compares two byte strings in time independent of where they differ.
public func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    var diff: UInt8 = 0
    for i in 0..<a.count { diff |= a[i] ^ b[i] }
    return diff == 0
}

// MARK: - Base64url

/// Base64url without padding (RFC 4648 §5), as JWTs and JWKs use.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    private static let reverse: [Int8] = {
        var table = [Int8](repeating: -1, count: 256)
        for (i, c) in alphabet.enumerated() { table[Int(c)] = Int8(i) }
        return table
    }()

    /// Encodes without padding.
    public static func encode(_ bytes: [UInt8]) -> String {
        var out = [UInt8]()
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var i = 0
        while i + 2 < bytes.count {
            let n = (UInt32(bytes[i]) << 16) | (UInt32(bytes[i + 1]) << 8) | UInt32(bytes[i + 2])
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)], alphabet[Int(n & 63)]]
            i += 3
        }
        let rest = bytes.count - i
        if rest == 1 {
            let n = UInt32(bytes[i]) << 16
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)]]
        } else if rest == 2 {
            let n = (UInt32(bytes[i]) << 16) | (UInt32(bytes[i + 1]) << 8)
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)]]
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes unpadded (or padded) base64url; nil on any invalid character or length.
    public static func decode<S: StringProtocol>(_ text: S) -> [UInt8]? {
        var input = Array(text.utf8)
        while input.last == UInt8(ascii: "=") { input.removeLast() }
        if input.count % 4 == 1 { return nil }
        var out = [UInt8]()
        out.reserveCapacity(input.count * 3 / 4)
        var buffer: UInt32 = 0
        var bits = 0
        for c in input {
            let v = reverse[Int(c)]
            if v < 0 { return nil }
            buffer = (buffer << 6) | UInt32(v)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8((buffer >> UInt32(bits)) & 0xFF))
            }
        }
        // Reject non-canonical trailing bits.
        if bits > 0 && (buffer & ((1 << UInt32(bits)) - 1)) != 0 { return nil }
        return out
    }
}

// MARK: - AES-GCM

/// AES-GCM with a nonce the caller chooses (AES-128 for a 16-byte key, AES-256 for a 32-byte one): the ciphertext
/// followed by the 16-byte tag. A nonce must never be used twice with one key.
public enum AESGCM {
    public static func seal(_ plaintext: [UInt8], key: [UInt8], nonce: [UInt8], aad: [UInt8] = []) throws -> [UInt8] {
        guard key.count == 16 || key.count == 32, nonce.count == 12 else { throw CryptoError.invalidKey }
        guard let ctx = EVP_CIPHER_CTX_new() else { throw CryptoError.operationFailed("context") }
        defer { EVP_CIPHER_CTX_free(ctx) }
        var length: Int32 = 0
        var out = [UInt8](repeating: 0, count: plaintext.count + 16)
        var tag = [UInt8](repeating: 0, count: 16)
        guard EVP_EncryptInit_ex(ctx, key.count == 16 ? EVP_aes_128_gcm() : EVP_aes_256_gcm(), nil, key, nonce) == 1,
              aad.isEmpty || EVP_EncryptUpdate(ctx, nil, &length, aad, Int32(aad.count)) == 1,
              EVP_EncryptUpdate(ctx, &out, &length, plaintext, Int32(plaintext.count)) == 1 else {
            throw CryptoError.operationFailed("encrypt")
        }
        let written = Int(length)
        let ok = out.withUnsafeMutableBufferPointer { EVP_EncryptFinal_ex(ctx, $0.baseAddress! + written, &length) }
        guard ok == 1, EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, &tag) == 1 else { throw CryptoError.operationFailed("encrypt") }
        return Array(out.prefix(written + Int(length))) + tag
    }
}

// MARK: - HKDF

/// HKDF with SHA-256 (RFC 5869), for at most 32 bytes of output: extract with `salt`, expand with `info`.
public func hkdfSHA256(salt: [UInt8], ikm: [UInt8], info: [UInt8], length: Int) -> [UInt8] {
    precondition(length <= 32, "one block of HKDF-Expand")
    let prk = hmacSHA256(key: salt, ikm)
    return Array(hmacSHA256(key: prk, info + [1]).prefix(length))
}

// MARK: - P-256 (ECDSA and ECDH)

/// A P-256 key pair: signs ES256 (VAPID) and agrees on secrets by ECDH (Web Push encryption). Held as the 32-byte
/// private scalar and the 65-byte uncompressed public point, the forms Web Push settings and subscriptions use.
public struct P256PrivateKey: Sendable {
    /// The 32-byte private scalar.
    public let raw: [UInt8]
    /// The 65-byte uncompressed public point (0x04 || x || y).
    public let publicKey: [UInt8]

    /// Generates a fresh key.
    public init() throws {
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { throw CryptoError.operationFailed("context") }
        defer { EVP_PKEY_CTX_free(ctx) }
        var pkey: OpaquePointer?
        guard EVP_PKEY_keygen_init(ctx) == 1, EVP_PKEY_CTX_set_group_name(ctx, "P-256") == 1, EVP_PKEY_generate(ctx, &pkey) == 1,
              let pkey else { throw CryptoError.operationFailed("generate") }
        defer { EVP_PKEY_free(pkey) }
        var bn: OpaquePointer?
        guard EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_PRIV_KEY, &bn) == 1, let bn else { throw CryptoError.operationFailed("generate") }
        defer { BN_clear_free(bn) }
        var scalar = [UInt8](repeating: 0, count: 32)
        guard BN_bn2binpad(bn, &scalar, 32) == 32 else { throw CryptoError.operationFailed("generate") }
        try self.init(raw: scalar)
    }

    /// The key of a 32-byte private scalar (its public point is computed); `invalidKey` for one that is not a key.
    public init(raw: [UInt8]) throws {
        guard raw.count == 32 else { throw CryptoError.invalidKey }
        let pkey = try Self.load(raw)
        defer { EVP_PKEY_free(pkey) }
        var point = [UInt8](repeating: 0, count: 65)
        var length = 0
        guard EVP_PKEY_get_octet_string_param(pkey, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, &point, 65, &length) == 1, length == 65 else {
            ERR_clear_error()
            throw CryptoError.invalidKey
        }
        self.raw = raw
        self.publicKey = point
    }

    /// An ES256 signature of `message` (SHA-256, then ECDSA): r and s, 32 bytes each, as JWS wants it.
    public func sign(_ message: [UInt8]) throws -> [UInt8] {
        let pkey = try Self.load(raw)
        defer { EVP_PKEY_free(pkey) }
        guard let ctx = EVP_MD_CTX_new() else { throw CryptoError.operationFailed("context") }
        defer { EVP_MD_CTX_free(ctx) }
        var der = [UInt8](repeating: 0, count: 80)
        var length = der.count
        guard EVP_DigestSignInit(ctx, nil, EVP_sha256(), nil, pkey) == 1,
              message.withUnsafeBufferPointer({ EVP_DigestSign(ctx, &der, &length, $0.baseAddress, $0.count) }) == 1,
              let rs = Self.rawSignature(Array(der.prefix(length))) else { throw CryptoError.operationFailed("sign") }
        return rs
    }

    /// The ECDH secret (32 bytes) shared with the holder of `peer`, a 65-byte uncompressed point; `invalidKey` when
    /// `peer` is not a point of the curve.
    public func sharedSecret(with peer: [UInt8]) throws -> [UInt8] {
        guard peer.count == 65, peer[0] == 4 else { throw CryptoError.invalidKey }
        let spki: [UInt8] = [0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01, 0x06, 0x08, 0x2A, 0x86, 0x48,
                             0xCE, 0x3D, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00] + peer
        guard let other = spki.withUnsafeBufferPointer({ b -> OpaquePointer? in
            var cursor: UnsafePointer<UInt8>? = b.baseAddress
            return d2i_PUBKEY(nil, &cursor, b.count)
        }) else { ERR_clear_error(); throw CryptoError.invalidKey }
        defer { EVP_PKEY_free(other) }
        let pkey = try Self.load(raw)
        defer { EVP_PKEY_free(pkey) }
        guard let ctx = EVP_PKEY_CTX_new(pkey, nil) else { throw CryptoError.operationFailed("context") }
        defer { EVP_PKEY_CTX_free(ctx) }
        var secret = [UInt8](repeating: 0, count: 32)
        var length = 32
        guard EVP_PKEY_derive_init(ctx) == 1, EVP_PKEY_derive_set_peer(ctx, other) == 1, EVP_PKEY_derive(ctx, &secret, &length) == 1,
              length == 32 else { ERR_clear_error(); throw CryptoError.invalidKey }
        return secret
    }

    /// The key from its scalar, through SEC 1's ECPrivateKey without the public point (OpenSSL computes it).
    private static func load(_ raw: [UInt8]) throws -> OpaquePointer {
        let der: [UInt8] = [0x30, 0x31, 0x02, 0x01, 0x01, 0x04, 0x20] + raw + [0xA0, 0x0A, 0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]
        guard let pkey = der.withUnsafeBufferPointer({ b -> OpaquePointer? in
            var cursor: UnsafePointer<UInt8>? = b.baseAddress
            return d2i_PrivateKey(EVP_PKEY_EC, nil, &cursor, b.count)
        }) else { ERR_clear_error(); throw CryptoError.invalidKey }
        return pkey
    }

    /// r || s from a DER ECDSA-Sig-Value (SEQUENCE { INTEGER r, INTEGER s }).
    private static func rawSignature(_ der: [UInt8]) -> [UInt8]? {
        guard der.count >= 8, der[0] == 0x30, Int(der[1]) == der.count - 2 else { return nil }
        var at = 2, out: [UInt8] = []
        for _ in 0..<2 {
            guard at + 2 <= der.count, der[at] == 0x02 else { return nil }
            let n = Int(der[at + 1])
            guard at + 2 + n <= der.count else { return nil }
            let value = der[(at + 2)..<(at + 2 + n)].drop(while: { $0 == 0 })
            guard value.count <= 32 else { return nil }
            out += [UInt8](repeating: 0, count: 32 - value.count) + value
            at += 2 + n
        }
        return out
    }
}

// MARK: - AES-256-GCM

/// Authenticated encryption of small secrets at rest (a signing key's seed): a box is a random 12-byte nonce, the
/// ciphertext and the 16-byte tag; `aad` (say, the key id) is bound to it without being stored in it.
public enum SecretBox {
    public static func seal(_ plaintext: [UInt8], key: [UInt8], aad: [UInt8]) throws -> [UInt8] {
        guard key.count == 32 else { throw CryptoError.invalidKey }
        let nonce = secureRandomBytes(12)
        return nonce + (try AESGCM.seal(plaintext, key: key, nonce: nonce, aad: aad))
    }

    /// The plaintext, or `invalidKey` when the key, the box or `aad` is not the one it was sealed with.
    public static func open(_ box: [UInt8], key: [UInt8], aad: [UInt8]) throws -> [UInt8] {
        guard key.count == 32, box.count >= 28 else { throw CryptoError.invalidKey }
        let nonce = Array(box.prefix(12)), tag = Array(box.suffix(16)), ciphertext = Array(box[12..<(box.count - 16)])
        guard let ctx = EVP_CIPHER_CTX_new() else { throw CryptoError.operationFailed("context") }
        defer { EVP_CIPHER_CTX_free(ctx) }
        var length: Int32 = 0
        var out = [UInt8](repeating: 0, count: ciphertext.count + 16)
        var expected = tag
        guard EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), nil, key, nonce) == 1,
              aad.isEmpty || EVP_DecryptUpdate(ctx, nil, &length, aad, Int32(aad.count)) == 1,
              EVP_DecryptUpdate(ctx, &out, &length, ciphertext, Int32(ciphertext.count)) == 1,
              EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, 16, &expected) == 1 else { throw CryptoError.invalidKey }
        let written = Int(length)
        let ok = out.withUnsafeMutableBufferPointer { EVP_DecryptFinal_ex(ctx, $0.baseAddress! + written, &length) }
        guard ok == 1 else { throw CryptoError.invalidKey }
        return Array(out.prefix(written + Int(length)))
    }
}

// MARK: - Ed25519

/// An Ed25519 key pair held as raw bytes (32-byte seed and 32-byte public key).
public struct Ed25519PrivateKey: Sendable {
    /// The 32-byte private seed.
    public let seed: [UInt8]
    /// The 32-byte public key.
    public let publicKey: [UInt8]

    /// Generates a fresh key.
    public init() throws {
        try self.init(seed: secureRandomBytes(32))
    }

    /// Rebuilds a key from its 32-byte seed.
    public init(seed: [UInt8]) throws {
        guard seed.count == 32 else { throw CryptoError.invalidKey }
        guard let pkey = seed.withUnsafeBufferPointer({
            EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, $0.baseAddress, 32)
        }) else { throw CryptoError.invalidKey }
        defer { EVP_PKEY_free(pkey) }
        var pub = [UInt8](repeating: 0, count: 32)
        var length = 32
        guard EVP_PKEY_get_raw_public_key(pkey, &pub, &length) == 1, length == 32 else {
            throw CryptoError.invalidKey
        }
        self.seed = seed
        self.publicKey = pub
    }

    /// Signs `message` (64-byte signature).
    public func sign(_ message: [UInt8]) throws -> [UInt8] {
        guard let pkey = seed.withUnsafeBufferPointer({
            EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, $0.baseAddress, 32)
        }) else { throw CryptoError.invalidKey }
        defer { EVP_PKEY_free(pkey) }
        guard let ctx = EVP_MD_CTX_new() else { throw CryptoError.operationFailed("context") }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestSignInit(ctx, nil, nil, nil, pkey) == 1 else { throw CryptoError.operationFailed("sign init") }
        var signature = [UInt8](repeating: 0, count: 64)
        var length = 64
        let ok = message.withUnsafeBufferPointer { m in
            EVP_DigestSign(ctx, &signature, &length, m.baseAddress, m.count)
        }
        guard ok == 1, length == 64 else { throw CryptoError.operationFailed("sign") }
        return signature
    }
}

/// Verifies an Ed25519 signature against a raw 32-byte public key.
public func ed25519Verify(publicKey: [UInt8], message: [UInt8], signature: [UInt8]) -> Bool {
    guard publicKey.count == 32, signature.count == 64 else { return false }
    guard let pkey = publicKey.withUnsafeBufferPointer({
        EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, $0.baseAddress, 32)
    }) else { return false }
    defer { EVP_PKEY_free(pkey) }
    guard let ctx = EVP_MD_CTX_new() else { return false }
    defer { EVP_MD_CTX_free(ctx) }
    guard EVP_DigestVerifyInit(ctx, nil, nil, nil, pkey) == 1 else { return false }
    let ok = message.withUnsafeBufferPointer { m in
        signature.withUnsafeBufferPointer { s in
            EVP_DigestVerify(ctx, s.baseAddress, s.count, m.baseAddress, m.count)
        }
    }
    ERR_clear_error()
    return ok == 1
}

// MARK: - RS256

/// Verifies an RS256 signature (RSASSA-PKCS1-v1_5 with SHA-256) with the RSA public key of a JWK's `n` and `e`
/// (big-endian bytes). False for a key or signature that is not one.
public func rs256Verify(modulus: [UInt8], exponent: [UInt8], message: [UInt8], signature: [UInt8]) -> Bool {
    guard (256...1024).contains(modulus.drop(while: { $0 == 0 }).count), !exponent.isEmpty, exponent.count <= 8,
          !signature.isEmpty, signature.count <= 1024 else { return false }
    let der = subjectPublicKeyInfo(modulus: modulus, exponent: exponent)
    guard let pkey = der.withUnsafeBufferPointer({ buffer -> OpaquePointer? in
        var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
        return d2i_PUBKEY(nil, &cursor, buffer.count)
    }) else { ERR_clear_error(); return false }
    defer { EVP_PKEY_free(pkey) }
    guard let ctx = EVP_MD_CTX_new() else { return false }
    defer { EVP_MD_CTX_free(ctx) }
    guard EVP_DigestVerifyInit(ctx, nil, EVP_sha256(), nil, pkey) == 1 else { ERR_clear_error(); return false }
    let ok = message.withUnsafeBufferPointer { m in
        signature.withUnsafeBufferPointer { s in EVP_DigestVerify(ctx, s.baseAddress, s.count, m.baseAddress, m.count) }
    }
    ERR_clear_error()
    return ok == 1
}

/// The DER SubjectPublicKeyInfo of an RSA key: SEQUENCE { SEQUENCE { rsaEncryption, NULL }, BIT STRING { SEQUENCE {
/// INTEGER n, INTEGER e } } }.
private func subjectPublicKeyInfo(modulus: [UInt8], exponent: [UInt8]) -> [UInt8] {
    func length(_ n: Int) -> [UInt8] {
        if n < 0x80 { return [UInt8(n)] }
        var bytes: [UInt8] = []
        var v = n
        while v > 0 { bytes.insert(UInt8(v & 0xFF), at: 0); v >>= 8 }
        return [0x80 | UInt8(bytes.count)] + bytes
    }
    func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] { [tag] + length(content.count) + content }
    func integer(_ bytes: [UInt8]) -> [UInt8] {
        var b = Array(bytes.drop(while: { $0 == 0 }))
        if b.isEmpty || b[0] & 0x80 != 0 { b.insert(0, at: 0) }
        return tlv(0x02, b)
    }
    let rsaEncryption: [UInt8] = [0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01, 0x05, 0x00]
    let key = tlv(0x30, integer(modulus) + integer(exponent))
    return tlv(0x30, tlv(0x30, rsaEncryption) + tlv(0x03, [0x00] + key))
}

// MARK: - Argon2id

/// Argon2id password hashing with OWASP's parameters (19 MiB, t=2, p=1).
///
/// At most one hash or verification per core runs at a time (each takes 19 MiB and a core for tens of milliseconds),
/// and at most `admissionLimit` run or wait in all (the kit sets half the server's threads), so a burst of sign-ups or
/// logins can take neither every server thread nor the memory. Beyond that, `hash` and `verify` throw `Busy` (the
/// service answers 503 with Retry-After).
public enum PasswordHasher {
    /// Too many hashes are running or waiting; try again shortly.
    public struct Busy: Error {}

    private static let cores = max(1, ProcessInfo.processInfo.activeProcessorCount)
    private static let admitted = Atomic<Int>(0)
    private static let running = DispatchSemaphore(value: cores)
    private static let limit = Atomic<Int>(cores * 4)

    /// How many hashes may run or wait at once (at least one per core runs).
    public static var admissionLimit: Int {
        get { limit.load(ordering: .relaxed) }
        set { limit.store(max(newValue, 1), ordering: .relaxed) }
    }

    private static func limited<T>(_ body: () throws -> T) throws -> T {
        guard admitted.add(1, ordering: .relaxed).newValue <= admissionLimit else {
            admitted.subtract(1, ordering: .relaxed)
            throw Busy()
        }
        defer { admitted.subtract(1, ordering: .relaxed) }
        running.wait()
        defer { running.signal() }
        return try body()
    }

    /// Memory cost in KiB.
    public static let memoryKiB: UInt32 = 19_456
    /// Iterations.
    public static let iterations: UInt32 = 2

    /// Hashes `password` into a PHC-format string (`$argon2id$v=19$...`).
    public static func hash(_ password: String) throws -> String {
        let salt = secureRandomBytes(16)
        let pwd = Array(password.utf8)
        let length = argon2_encodedlen(iterations, memoryKiB, 1, 16, 32, Argon2_id)
        var encoded = [CChar](repeating: 0, count: length + 1)
        let rc = try limited {
            pwd.withUnsafeBufferPointer { p in
                salt.withUnsafeBufferPointer { s in
                    argon2id_hash_encoded(iterations, memoryKiB, 1, p.baseAddress, p.count,
                                          s.baseAddress, s.count, 32, &encoded, encoded.count)
                }
            }
        }
        guard rc == ARGON2_OK.rawValue else { throw CryptoError.operationFailed("argon2") }
        return String(decoding: encoded.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// True when `password` matches the encoded hash.
    public static func verify(_ password: String, encoded: String) throws -> Bool {
        let pwd = Array(password.utf8)
        return try limited {
            pwd.withUnsafeBufferPointer { p in
                argon2id_verify(encoded, p.baseAddress, p.count) == ARGON2_OK.rawValue
            }
        }
    }
}

// MARK: - JWS signing keys from PEM (ES256, RS256)

/// A private key in PEM, PKCS#8 (`-----BEGIN PRIVATE KEY-----`), as Apple's `.p8` files and Google's service
/// accounts give it: a P-256 key signs ES256, an RSA key (2048 bits or more) RS256. Held as its DER bytes, loaded
/// for each signature (a provider's token is signed once in tens of minutes, not per message).
public struct JWSSigningKey: Sendable {
    public enum Algorithm: String, Sendable { case es256 = "ES256", rs256 = "RS256" }
    public let algorithm: Algorithm
    private let der: [UInt8]

    /// The key of `pem` (newlines may be written `\n`, as a setting or JSON string carries them); `invalidKey` for
    /// anything but a PKCS#8 P-256 or RSA private key.
    public init(pem: String) throws {
        let text = pem.replacingOccurrences(of: "\\n", with: "\n")
        guard let begin = text.range(of: "-----BEGIN PRIVATE KEY-----"), let end = text.range(of: "-----END PRIVATE KEY-----"),
              begin.upperBound <= end.lowerBound else { throw CryptoError.invalidKey }
        let body = text[begin.upperBound..<end.lowerBound].filter { !$0.isWhitespace }
        guard let der = Data(base64Encoded: String(body)).map(Array.init) else { throw CryptoError.invalidKey }
        let pkey = try Self.load(der)
        defer { EVP_PKEY_free(pkey) }
        switch EVP_PKEY_get_base_id(pkey) {
        case EVP_PKEY_EC:
            var name = [CChar](repeating: 0, count: 64)
            guard EVP_PKEY_get_utf8_string_param(pkey, OSSL_PKEY_PARAM_GROUP_NAME, &name, name.count, nil) == 1,
                  ["prime256v1", "P-256"].contains(String(cString: name)) else { ERR_clear_error(); throw CryptoError.invalidKey }
            algorithm = .es256
        case EVP_PKEY_RSA:
            guard EVP_PKEY_get_bits(pkey) >= 2048 else { throw CryptoError.invalidKey }
            algorithm = .rs256
        default:
            throw CryptoError.invalidKey
        }
        self.der = der
    }

    /// The JWS signature of `message`: for ES256, r || s (64 bytes, not DER); for RS256, RSASSA-PKCS1-v1_5 over SHA-256.
    public func sign(_ message: [UInt8]) throws -> [UInt8] {
        let pkey = try Self.load(der)
        defer { EVP_PKEY_free(pkey) }
        guard let ctx = EVP_MD_CTX_new() else { throw CryptoError.operationFailed("context") }
        defer { EVP_MD_CTX_free(ctx) }
        var length = 0
        guard EVP_DigestSignInit(ctx, nil, EVP_sha256(), nil, pkey) == 1,
              message.withUnsafeBufferPointer({ EVP_DigestSign(ctx, nil, &length, $0.baseAddress, $0.count) }) == 1 else {
            ERR_clear_error()
            throw CryptoError.operationFailed("sign")
        }
        var signature = [UInt8](repeating: 0, count: length)
        guard message.withUnsafeBufferPointer({ EVP_DigestSign(ctx, &signature, &length, $0.baseAddress, $0.count) }) == 1 else {
            ERR_clear_error()
            throw CryptoError.operationFailed("sign")
        }
        signature = Array(signature.prefix(length))
        guard algorithm == .es256 else { return signature }
        guard let rs = P256PrivateKey.jwsSignature(signature) else { throw CryptoError.operationFailed("sign") }
        return rs
    }

    /// A compact JWS (a JWT) of `header` (`alg` is added) and `claims`, both JSON objects.
    public func jwt(header: [String: Any] = [:], claims: [String: Any]) throws -> String {
        var header = header
        header["alg"] = algorithm.rawValue
        let h = try JSONSerialization.data(withJSONObject: header, options: [.sortedKeys, .withoutEscapingSlashes])
        let c = try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys, .withoutEscapingSlashes])
        let input = Base64URL.encode(Array(h)) + "." + Base64URL.encode(Array(c))
        return input + "." + Base64URL.encode(try sign(Array(input.utf8)))
    }

    private static func load(_ der: [UInt8]) throws -> OpaquePointer {
        guard let pkey = der.withUnsafeBufferPointer({ b -> OpaquePointer? in
            var cursor: UnsafePointer<UInt8>? = b.baseAddress
            return d2i_AutoPrivateKey(nil, &cursor, b.count)
        }) else { ERR_clear_error(); throw CryptoError.invalidKey }
        return pkey
    }
}

extension P256PrivateKey {
    /// r || s of a DER ECDSA signature, for `JWSSigningKey`.
    fileprivate static func jwsSignature(_ der: [UInt8]) -> [UInt8]? { rawSignature(der) }
}
