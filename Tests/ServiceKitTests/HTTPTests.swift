@testable import Web
import Crypto
import Foundation
import HTTP
import Models
import Postgres
@testable import Runtime
import XCTest

final class RouterTests: XCTestCase {
    func router() -> Router {
        var r = Router()
        r.add("GET", "/v1/groups/{id}") { req in .text("group \(req.parameter("id"))") }
        r.add("POST", "/v1/groups/join") { _ in .text("join") }
        r.add("GET", "/v1/groups/{id}/members/{userId}") { req in .text("\(req.parameter("id"))/\(req.parameter("userId"))") }
        r.add("POST", "/v1/media", bodyLimit: 10 << 20) { _ in .text("media") }
        return r
    }

    func route(_ method: String, _ path: String) throws -> String? {
        guard case .found(let route, let params) = router().match(method: method, path: path) else { return nil }
        var request = Request(method: method, path: path)
        request.pathParameters = params
        return String(decoding: try Router.invoke(route, request).body, as: UTF8.self)
    }

    func testParametersAndLiteralsMatch() throws {
        XCTAssertEqual(try route("GET", "/v1/groups/42"), "group 42")
        XCTAssertEqual(try route("GET", "/v1/groups/a/members/b"), "a/b")
        XCTAssertEqual(try route("HEAD", "/v1/groups/42"), "group 42")
    }

    func testLiteralSegmentsWinOverParameters() throws {
        var r = router()
        r.add("POST", "/v1/groups/{id}") { _ in .text("param") }
        guard case .found(let route, _) = r.match(method: "POST", path: "/v1/groups/join") else { return XCTFail() }
        XCTAssertEqual(route.pattern, "/v1/groups/join")
    }

    func testUnknownPathsAndWrongMethodsAreTold() {
        guard case .notFound = router().match(method: "GET", path: "/v1/nothing") else { return XCTFail() }
        guard case .notFound = router().match(method: "GET", path: "/v1/groups//members/x") else { return XCTFail("empty parameter") }
        guard case .notFound = router().match(method: "GET", path: "/v1/groups/1/") else { return XCTFail("trailing slash") }
        guard case .methodNotAllowed(let allowed) = router().match(method: "DELETE", path: "/v1/groups/1") else { return XCTFail() }
        XCTAssertEqual(allowed, ["GET"])
        guard case .methodNotAllowed(let literal) = router().match(method: "GET", path: "/v1/groups/join") else {
            return XCTFail("a path written as a pattern without parameters is that pattern's, whatever the method")
        }
        XCTAssertEqual(literal, ["POST"])
        guard case .notFound = router().match(method: "POST", path: "/v1/%6Dedia") else { return XCTFail("literals match as written") }
    }

    func testBodyLimitsComeFromTheRoute() {
        XCTAssertEqual(router().match(method: "POST", path: "/v1/media").bodyLimit, 10 << 20)
        XCTAssertEqual(router().match(method: "POST", path: "/v1/groups/join").bodyLimit, 1 << 20)
        XCTAssertEqual(router().match(method: "POST", path: "/unknown").bodyLimit, 1 << 20)
    }
}

final class ErrorBodyTests: XCTestCase {
    func body(_ e: HTTPError) throws -> [String: Any] {
        let json = try JSONSerialization.jsonObject(with: Data(e.response.body)) as? [String: Any]
        return json?["error"] as? [String: Any] ?? [:]
    }

    func testErrorsRenderTheConventionsShape() throws {
        let e = HTTPError.validation("username is required.", field: "username")
        XCTAssertEqual(e.response.status, 400)
        XCTAssertEqual(e.response.header("content-type"), "application/json")
        XCTAssertEqual(try body(e) as NSDictionary, ["code": "validation_failed", "message": "username is required.", "field": "username"])
        XCTAssertNil(try body(.notFound())["field"])
        XCTAssertEqual(HTTPError.rateLimited(retryAfter: 30).response.header("Retry-After"), "30")
        XCTAssertEqual(HTTPError.unavailable().response.header("Retry-After"), "1")
    }

    func testDatabaseErrorsMapWithoutLeakingInternals() throws {
        struct Boom: Error {}
        XCTAssertEqual(HTTPError.from(Boom()).status, 500)
        XCTAssertEqual(try body(HTTPError.from(Boom()))["message"] as? String, "Something went wrong on our side.")
        let cases: [(String, Int)] = [("23505", 409), ("23503", 409), ("23514", 400), ("22P02", 400), ("08006", 503), ("42P01", 500)]
        for (state, status) in cases {
            let error = PostgresErrorFixture.make(state)
            let mapped = HTTPError.from(error)
            XCTAssertEqual(mapped.status, status, state)
            XCTAssertFalse(mapped.message.contains("secret"), "no server text in responses")
        }
    }
}

/// Builds PostgresErrors the way the connection does, from an SQLSTATE.
enum PostgresErrorFixture {
    static func make(_ state: String) -> PostgresError {
        PostgresError.fromServer(sqlState: state, constraint: nil, message: "relation secret_table violates secret")
    }
}

final class JSONBodyTests: XCTestCase {
    struct Body: RequestBody {
        static let schema = Schema.object([
            "name": .required(.string()), "count": .optional(.integer(0...100)), "tags": .optional(.array(.string(), count: 0...3)),
        ])
        let name: String
        let count: Int?
        let tags: [String]?
    }

    /// A body with every kind of shape, nested.
    struct Rich: RequestBody {
        struct Place: RequestBody {
            static let schema = Schema.object(["lat": .required(.number(-90...90)), "note": .optional(.text(max: 5))])
            let lat: Double
            let note: String?
        }
        static let schema = Schema.object([
            "title": .required(.text(max: 10)), "kind": .required(.oneOf(["a", "b"])), "id": .optional(.uuid),
            "at": .optional(.dateTime), "place": .absentOrValue(Place.schema), "code": .optional(.string(min: 2, max: 4, pattern: "^[a-z]+$")),
        ])
        let title: String
        let kind: String
        let id: UUID?
        let at: String?
        let place: Place?
        let code: String?
    }

    func rich(_ text: String) throws -> Rich {
        try JSON.decodeBody(Request(method: "POST", path: "/", body: Array(text.utf8)), as: Rich.self)
    }

    func testOneDescriptionValidatesNormalisesDecodesAndDocuments() throws {
        let r = try rich(#"{"title":"  hi  ","kind":"a","id":"01a22a37-615f-717a-9e7f-201651a464c1","place":{"lat":1.5,"note":" n "}}"#)
        XCTAssertEqual(r.title, "hi", "text arrives trimmed")
        XCTAssertEqual(r.place?.note, "n")
        XCTAssertEqual(r.id?.uuidString.lowercased(), "01a22a37-615f-717a-9e7f-201651a464c1")
        XCTAssertEqual(try rich(#"{"title":"x","kind":"a","id":"01A22A37-615F-717A-9E7F-201651A464C1"}"#).id, r.id, "either case")
        for (body, field) in [(#"{"title":"   ","kind":"a"}"#, "title"), (#"{"title":"12345678901","kind":"a"}"#, "title"),
                              (#"{"title":"bell\u0007","kind":"a"}"#, "title"), (#"{"title":"x","kind":"c"}"#, "kind"),
                              (#"{"title":"x","kind":"a","id":"nope"}"#, "id"),
                              (#"{"title":"x","kind":"a","id":"+1a22a37-615f-717a-9e7f-201651a464c1"}"#, "id"),
                              (#"{"title":"x","kind":"a","id":"01a22a37-615f-717a-9e7f-201651a464c"}"#, "id"), (#"{"title":"x","kind":"a","at":"yesterday"}"#, "at"),
                              (#"{"title":"x","kind":"a","place":{"lat":91}}"#, "place.lat"),
                              (#"{"title":"x","kind":"a","place":{"lat":1,"extra":1}}"#, "place.extra"),
                              (#"{"title":"x","kind":"a","place":null}"#, "place"), (#"{"title":"x","kind":"a","code":"ABC"}"#, "code"),
                              (#"{"title":"x","kind":"a","code":"abcde"}"#, "code"), (#"{"title":"x","kind":true}"#, "kind")] {
            XCTAssertThrowsError(try rich(body), body) { XCTAssertEqual(($0 as? HTTPError)?.field, field, body) }
        }
        let doc = Rich.schema.jsonSchema
        XCTAssertEqual(doc["additionalProperties"] as? Bool, false)
        XCTAssertEqual(Set(doc["required"] as? [String] ?? []), ["title", "kind"])
        let properties = doc["properties"] as? [String: [String: Any]] ?? [:]
        XCTAssertEqual(properties["kind"]?["enum"] as? [String], ["a", "b"])
        XCTAssertEqual(properties["id"]?["type"] as? [String], ["string", "null"], "optional members may be null")
        XCTAssertEqual(properties["place"]?["type"] as? String, "object", "absent-or-value members may not")
        XCTAssertEqual(properties["title"]?["maxLength"] as? Int, 10)
    }

    func decode(_ text: String, contentType: String? = "application/json") throws -> Body {
        var headers: [String: String] = [:]
        if let contentType { headers["Content-Type"] = contentType }
        return try JSON.decodeBody(Request(method: "POST", path: "/", headers: headers, body: Array(text.utf8)), as: Body.self)
    }

    func rejects(_ text: String, _ code: String, field: String? = nil, contentType: String? = "application/json",
                 file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try decode(text, contentType: contentType), file: file, line: line) { error in
            let e = error as? HTTPError
            XCTAssertEqual(e?.code, code, text, file: file, line: line)
            if let field { XCTAssertEqual(e?.field, field, text, file: file, line: line) }
        }
    }

    func testValidBodiesDecode() throws {
        XCTAssertEqual(try decode(#"{"name":"x","count":2}"#).count, 2)
        XCTAssertEqual(try decode(#"{"name":"x"}"#, contentType: "application/json; charset=utf-8").name, "x")
        XCTAssertEqual(try decode(#"{"name":"x"}"#, contentType: nil).name, "x")
    }

    func testEveryKindOfBadBodyIsAClearClientError() {
        rejects("", "invalid_json")
        rejects("{", "invalid_json")
        rejects("{'name':'x'}", "invalid_json")
        rejects("[1,2]", "validation_failed")
        rejects("\"text\"", "validation_failed")
        rejects(#"{"count":1}"#, "validation_failed", field: "name")
        rejects(#"{"name":null}"#, "validation_failed", field: "name")
        rejects(#"{"name":5}"#, "validation_failed", field: "name")
        rejects(#"{"name":"x","count":"2"}"#, "validation_failed", field: "count")
        rejects(#"{"name":"x","count":1.5}"#, "validation_failed")
        rejects(#"{"name":"x","tags":[1]}"#, "validation_failed", field: "tags[0]")
        rejects(#"{"name":"x","tags":["a","b","c","d"]}"#, "validation_failed", field: "tags")
        rejects(#"{"name":"x","count":101}"#, "validation_failed", field: "count")
        rejects(#"{"name":"x","admin":true}"#, "validation_failed", field: "admin")
        rejects(#"{"name":"a\u0000b"}"#, "validation_failed", field: "name")
        rejects(#"{"name":"x"}"#, "unsupported_media_type", contentType: "text/plain")
        XCTAssertThrowsError(try JSON.decodeBody(Request(method: "POST", path: "/", body: [0x7B, 0x22, 0x6E, 0x22, 0x3A, 0x22, 0xFF, 0xFE, 0x22, 0x7D]),
                                                 as: Body.self)) { XCTAssertEqual(($0 as? HTTPError)?.code, "invalid_json") }
    }
}

final class CursorTests: XCTestCase {
    func testCursorsRoundTripAndRejectForgeries() {
        let values = ["2026-11-30T02:00:00.000Z", "01a22a37-615f-717a-9e7f-201651a464c1"]
        let cursor = Cursor.encode(values)
        XCTAssertEqual(Cursor.decode(cursor), values)
        XCTAssertFalse(cursor.contains("="), "URL-safe, no padding")
        XCTAssertNil(Cursor.decode("not a cursor"))
        XCTAssertNil(Cursor.decode(Base64URLText.of("{\"a\":1}")))
        XCTAssertNil(Cursor.decode(String(repeating: "A", count: 2000)))
    }

    func testPageReadsLimitAndCursor() throws {
        XCTAssertEqual(try Page(Request(method: "GET", path: "/")).limit, 20)
        XCTAssertEqual(try Page(Request(method: "GET", path: "/", query: ["limit": "100"])).limit, 100)
        for bad in ["0", "101", "-1", "ten", "1e2"] {
            XCTAssertThrowsError(try Page(Request(method: "GET", path: "/", query: ["limit": bad]))) {
                XCTAssertEqual(($0 as? HTTPError)?.field, "limit")
            }
        }
        XCTAssertThrowsError(try Page(Request(method: "GET", path: "/", query: ["cursor": "%%%"])))
        XCTAssertEqual(try Page(Request(method: "GET", path: "/", query: ["cursor": Cursor.encode(["a"])])).after, ["a"])
    }
}

enum Base64URLText {
    static func of(_ s: String) -> String { Crypto.Base64URL.encode(Array(s.utf8)) }
}

final class LoggerTests: XCTestCase {
    func testNumbersPrintAsPercentThreeFAndTextIsQuotedAsJSON() {
        for d in [0, 0.0004, 0.0005, 0.344, 1.5, 12.0996, 999.9995, -0.25, -0.0001, 123_456.789] {
            XCTAssertEqual(Logger.milli(d), String(format: "%.3f", d == -0.0001 ? 0 : d), "\(d)")
        }
        XCTAssertEqual(Logger.milli(.nan), "null")
        XCTAssertEqual(JSONString.quoted("plain /v1/users/me"), #""plain /v1/users/me""#)
        XCTAssertEqual(JSONString.quoted("a\"b\\c\nd\u{1}é"), #""a\"b\\c\nd\u0001é""#)
    }
}
