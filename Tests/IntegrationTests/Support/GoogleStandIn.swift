import Crypto
import Foundation
import HTTP

/// Google as sign-in sees it, stood in by the test: RSA keys made with the `openssl` command, their JWK set served by
/// a server of the test's own (`jwksURL`), ID tokens signed as Google signs them.
final class GoogleStandIn {
    let clientId: String
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("google-\(UUID().uuidString.prefix(8))")
    let port = TestEnvironment.freePort()
    private var server: HTTPServer!
    /// The key the JWK set publishes, and one it does not.
    var key: String { directory.appendingPathComponent("key.pem").path }
    var otherKey: String { directory.appendingPathComponent("other.pem").path }
    var jwksURL: String { "http://127.0.0.1:\(port)/certs" }
    /// Gina's profile picture, as Google hosts it.
    var pictureURL: String { "http://127.0.0.1:\(port)/picture.png" }

    init(clientId: String = "test-client.apps.googleusercontent.com") throws {
        self.clientId = clientId
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for path in [key, otherKey] {
            try IntegrationTests.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", path])
        }
        let modulus = try IntegrationTests.run(["openssl", "rsa", "-in", key, "-noout", "-modulus"])
            .trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "Modulus=", with: "")
        let n = stride(from: 0, to: modulus.count, by: 2).map { i -> UInt8 in
            let start = modulus.index(modulus.startIndex, offsetBy: i)
            return UInt8(modulus[start..<modulus.index(start, offsetBy: 2)], radix: 16)!
        }
        let jwks = Array(#"{"keys":[{"kid":"k1","kty":"RSA","alg":"RS256","use":"sig","n":"\#(Base64URL.encode(n))","e":"AQAB"}]}"#.utf8)
        server = HTTPServer(port: UInt16(port), threads: 2, route: { _, _ in .notFound }) { request, _ in
            request.path == "/picture.png" ? Response(status: 200, headers: [("Content-Type", "image/png")], body: Images.png)
                : Response(status: 200, headers: [("Content-Type", "application/json")], body: jwks)
        }
        try server.start()
    }

    /// An ID token as Google would sign it for Gina, with `changes` to its claims (nil removes one).
    func token(_ changes: [String: Any?] = [:], kid: String = "k1", alg: String = "RS256", signedWith keyFile: String? = nil) throws -> String {
        let now = Int(Date().timeIntervalSince1970)
        var claims: [String: Any] = ["iss": "https://accounts.google.com", "aud": clientId, "sub": "g-1234567890",
                                     "email": "gina@example.com", "email_verified": true, "name": "Gina Google",
                                     "iat": now - 10, "exp": now + 3600]
        for (k, v) in changes { claims[k] = v }
        let header = Base64URL.encode(Array(try JSONSerialization.data(withJSONObject: ["alg": alg, "kid": kid, "typ": "JWT"])))
        let payload = Base64URL.encode(Array(try JSONSerialization.data(withJSONObject: claims)))
        let input = directory.appendingPathComponent("input-\(UUID().uuidString)")
        let signature = directory.appendingPathComponent("sig-\(UUID().uuidString)")
        try Data("\(header).\(payload)".utf8).write(to: input)
        try IntegrationTests.run(["openssl", "dgst", "-sha256", "-sign", keyFile ?? key, "-out", signature.path, input.path])
        return "\(header).\(payload).\(Base64URL.encode(Array(try Data(contentsOf: signature))))"
    }

    func stop() {
        server?.stop(grace: 0)
        try? FileManager.default.removeItem(at: directory)
    }
}
