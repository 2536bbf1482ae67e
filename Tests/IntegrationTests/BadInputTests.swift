import Foundation
import XCTest

/// Every endpoint tried with malformed and hostile input: a clear 4xx each time, never a 500, nothing half-written.
final class BadInputTests: AuthTestCase {
    /// The JSON endpoints with a valid body for each.
    func endpoints(token: String) -> [(method: String, path: String, valid: [String: Any], token: String?)] {
        [("POST", "/v1/auth/signup", ["username": "valid_user", "email": "valid@example.com", "password": "correct horse battery", "fullName": "V"], nil),
         ("POST", "/v1/auth/login", ["username": "valid_user", "password": "correct horse battery"], nil),
         ("POST", "/v1/auth/refresh", ["refreshToken": "abc"], nil),
         ("PATCH", "/v1/users/me", ["fullName": "Someone"], token),
         ("POST", "/v1/users/me/password", ["currentPassword": "correct horse battery", "newPassword": "another long one"], token)]
    }

    func testMalformedBodiesAreClearClientErrorsAndWriteNothing() throws {
        let token = try api.signup("owner_bad", password: "correct horse battery").accessToken
        let usersBefore = try count("users"), sessionsBefore = try count("sessions"), outboxBefore = try count("outbox")
        let invalidUTF8: [UInt8] = Array(#"{"username":""#.utf8) + [0xC3, 0x28, 0xFF] + Array(#""}"#.utf8)
        let bodies: [(String, [UInt8], String)] = [
            ("empty", [], "invalid_json"),
            ("truncated", Array(#"{"username":"#.utf8), "invalid_json"),
            ("not json", Array("username=x&password=y".utf8), "invalid_json"),
            ("array", Array("[]".utf8), "validation_failed"),
            ("number", Array("42".utf8), "validation_failed"),
            ("invalid UTF-8", invalidUTF8, "invalid_json"),
            ("a name twice", Array(#"{"fullName":"Ann","fullName":"Bob","username":"x"}"#.utf8), "invalid_json"),
        ]
        for e in endpoints(token: token) {
            for (name, body, code) in bodies {
                let r = try api.send(e.method, e.path, raw: body, token: e.token, headers: ["Content-Type": "application/json"])
                assertClientError(r, 400, code: code, "\(e.path) \(name)")
            }
            // Wrong types for each field, missing fields, unknown fields, nulls.
            for key in e.valid.keys {
                var wrong = e.valid; wrong[key] = ["nested": true]
                assertClientError(try api.send(e.method, e.path, json: wrong, token: e.token), 400, code: "validation_failed", "\(e.path) \(key) object")
                wrong[key] = 12345
                assertClientError(try api.send(e.method, e.path, json: wrong, token: e.token), 400, code: "validation_failed", "\(e.path) \(key) number")
            }
            var unknown = e.valid; unknown["isAdmin"] = true
            let r = try api.send(e.method, e.path, json: unknown, token: e.token)
            assertClientError(r, 400, code: "validation_failed", "\(e.path) unknown field")
            XCTAssertEqual(r.errorField, "isAdmin")
            assertClientError(try api.send(e.method, e.path, raw: Array("{}".utf8), token: e.token,
                                           headers: ["Content-Type": "text/plain"]), 415, code: "unsupported_media_type", e.path)
        }
        XCTAssertEqual(try count("users"), usersBefore)
        XCTAssertEqual(try count("sessions"), sessionsBefore)
        XCTAssertEqual(try count("outbox"), outboxBefore)
    }

    func testTwoMebibyteBodiesAre413BeforeTheyAreRead() throws {
        let token = try api.signup().accessToken
        let big = [UInt8](repeating: UInt8(ascii: "a"), count: 2 << 20)
        for e in endpoints(token: token) {
            let r = try api.send(e.method, e.path, raw: big, token: e.token, headers: ["Content-Type": "application/json"])
            assertClientError(r, 413, code: "payload_too_large", e.path)
            api.http.disconnect()
        }
        XCTAssertEqual(try api.get("/healthz").status, 200, "the server is fine afterwards")
    }

    func testAnOversizedChunkedBodyIsRefusedAtTheLimitNotReadToTheEnd() throws {
        let token = try api.signup().accessToken
        let connection = try RawConnection(port: api.port)
        connection.write("PATCH /v1/users/me HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n"
                         + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        let chunk = Array("10000\r\n".utf8) + [UInt8](repeating: UInt8(ascii: "a"), count: 0x10000) + Array("\r\n".utf8)
        var sent = 0, closed = false
        while sent < 50 << 20 && !closed {
            guard connection.write(chunk) else { break }
            sent += 0x10000
            closed = connection.read(for: 0.005)
        }
        closed = closed || connection.read(for: 2)
        XCTAssertTrue(closed, "the server stopped the upload")
        XCTAssertEqual(connection.status, 413, connection.head)
        XCTAssertTrue(connection.body.contains(#""code":"payload_too_large""#), connection.body)
        XCTAssertLessThan(sent, 4 << 20, "at the limit (1 MiB), not after the whole body")
        XCTAssertEqual(try api.get("/healthz").status, 200)
    }

    func testAPathCutByAnEncodedNulIsNotTheResourceAndHTTP11NeedsAHost() throws {
        let token = try api.signup().accessToken
        XCTAssertEqual(try api.get("/v1/users/me", token: token).status, 200)
        XCTAssertEqual(try api.get("/v1/users/me%00junk", token: token).status, 404, "the path is not cut at the NUL")
        let noHost = try RawConnection(port: api.port)
        noHost.write("GET /healthz HTTP/1.1\r\n\r\n")
        noHost.read(for: 2)
        XCTAssertEqual(noHost.status, 400, noHost.head)
        XCTAssertTrue(noHost.body.contains("\"code\""), "the error contract: \(noHost.body)")
        let response = try api.get("/v1/users/me", token: token)
        XCTAssertEqual(response.headers["x-content-type-options"], "nosniff")
        // Heads the server refuses before routing get the error contract too, and are logged like any answer.
        let heads: [(String, Int, String)] = [
            ("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + String(repeating: "a", count: 100_000) + "\r\n\r\n", 431, "header_too_large"),
            ("GET /" + String(repeating: "a", count: 10_000) + " HTTP/1.1\r\nHost: x\r\n\r\n", 414, "uri_too_long"),
            ("GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n", 505, "http_version_not_supported"),
            ("GET /healthz\r\n\r\n", 400, "bad_request"),
            ("GET /healthz HTTP/1.1\r\nHost: x\r\n folded: header\r\n\r\n", 400, "bad_request"),
            ("POST /v1/auth/login HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400, "bad_request"),
            ("POST /v1/auth/login HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501, "not_implemented"),
            // Chunked not last cannot be framed (RFC 9112, 6.3): 400, not 501.
            ("POST /v1/auth/login HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 400, "bad_request"),
        ]
        for (head, status, code) in heads { try RawConnection.assertRefused(head, port: api.port, status: status, code: code) }
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 5) {
            let metrics = String(decoding: (try? api.get("/metrics"))?.body ?? [], as: UTF8.self)
            return [431, 414, 505, 400, 501].allSatisfy { metrics.contains(#"route="refused",status="\#($0)""#) }
        }, "each refusal is counted as an answer")
    }

    func testHostileFieldValuesAreRefusedOrStoredVerbatim() throws {
        let long = String(repeating: "x", count: 100_000)
        let cases: [([String: Any], String)] = [
            (["username": long, "email": "a@example.com", "password": "correct horse battery", "fullName": "A"], "username"),
            (["username": "ok_name", "email": long + "@example.com", "password": "correct horse battery", "fullName": "A"], "email"),
            (["username": "ok_name", "email": "a@example.com", "password": long, "fullName": "A"], "password"),
            (["username": "ok_name", "email": "a@example.com", "password": "correct horse battery", "fullName": long], "fullName"),
            (["username": "x'; DROP TABLE users; --", "email": "a@example.com", "password": "correct horse battery", "fullName": "A"], "username"),
            (["username": "ok_name", "email": "a'--@example.com\" OR 1=1", "password": "correct horse battery", "fullName": "A"], "email"),
            (["username": "ok_name", "email": "not-an-email", "password": "correct horse battery", "fullName": "A"], "email"),
            (["username": "ok_name", "email": "a@example.com", "password": "short", "fullName": "A"], "password"),
            (["username": "ok_name", "email": "a@example.com", "password": "correct horse battery", "fullName": "   "], "fullName"),
            (["username": "ok_name", "email": "a@example.com", "password": "correct horse battery", "fullName": "bell\u{7}"], "fullName"),
            (["username": "ok_name", "email": "a@example.com", "password": "correct horse battery", "fullName": "nul\u{0}byte"], "fullName"),
            (["username": "ab", "email": "a@example.com", "password": "correct horse battery", "fullName": "A"], "username"),
            (["username": "ünïcode", "email": "a@example.com", "password": "correct horse battery", "fullName": "A"], "username"),
        ]
        for (body, field) in cases {
            let r = try api.post("/v1/auth/signup", body)
            assertClientError(r, 400, code: "validation_failed", field)
            XCTAssertEqual(r.errorField, field, String(describing: body[field]).prefix(60).description)
        }
        XCTAssertEqual(try count("users"), 0)
        // SQL metacharacters where text is allowed are stored as text, never executed.
        let name = "Robert'); DROP TABLE auth.users;-- \"😀\""
        let ok = try api.post("/v1/auth/signup", ["username": "bobby.tables", "email": "bobby@example.com",
                                                  "password": "'; SELECT pg_sleep(10); --", "fullName": name])
        XCTAssertEqual(ok.status, 201)
        XCTAssertEqual((ok["user"] as? [String: Any])?["fullName"] as? String, name)
        XCTAssertEqual(try api.post("/v1/auth/login", ["username": "bobby.tables", "password": "'; SELECT pg_sleep(10); --"]).status, 200)
        for login in [["username": "' OR '1'='1", "password": "' OR '1'='1"], ["email": "%", "password": "x"], ["username": "_", "password": "x"]] {
            assertClientError(try api.post("/v1/auth/login", login), 401, code: "unauthenticated")
        }
    }

    func testBadTokensAndIdentifiersAre401Or404() throws {
        for header in ["", "Bearer", "Bearer ", "Basic dXNlcjpwYXNz", "Bearer not.a.jwt", "Bearer " + String(repeating: "a", count: 5000),
                       "Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0."] {
            let r = try api.send("GET", "/v1/users/me", headers: header.isEmpty ? [:] : ["Authorization": header])
            assertClientError(r, 401, code: "unauthenticated", header.prefix(30).description)
        }
        assertClientError(try api.get("/v1/nothing/here"), 404, code: "not_found")
        assertClientError(try api.send("PUT", "/v1/users/me"), 405)
        assertClientError(try api.post("/v1/auth/signup", ["username": "idem_bad", "email": "i@example.com", "password": "correct horse battery",
                                                           "fullName": "I"], headers: ["Idempotency-Key": String(repeating: "k", count: 300)]),
                          400, code: "validation_failed")
    }

    func testRequestIdsAreEchoedOrGenerated() throws {
        let given = try api.send("GET", "/healthz", headers: ["X-Request-Id": "trace-abc-123"])
        XCTAssertEqual(given.headers["x-request-id"], "trace-abc-123")
        let hostile = try api.send("GET", "/healthz", headers: ["X-Request-Id": "a\"b{c}"])
        XCTAssertNotEqual(hostile.headers["x-request-id"], "a\"b{c}", "an unsafe id is replaced")
        XCTAssertEqual(hostile.headers["x-request-id"]?.count, 36)
    }
}
