import Foundation
import HTTP
import Runtime
import Web
import XCTest

/// A group's routes: its access rule and prefix on each route, typed path parameters, and the documentation each
/// route declares in its one call.
final class RouteGroupTests: XCTestCase {
    struct NoteBody: RequestBody {
        var text: String
        static let schema = Schema.object(["text": .required(.text(max: 10))])
    }

    func router() throws -> Router {
        let operators = try SharedSecret(Environment(["OPERATOR_TOKEN": String(repeating: "k", count: 40)]),
                                         variable: "OPERATOR_TOKEN", scheme: "operator")
        var r = Router()
        r.group("/v1/notes", .everyone) { notes in
            notes.add("GET", "/{id}", "A note", answers: (200, nil),
                      query: [QueryParameter("limit", .integer(1...5), "How many")]) { context in
                .text("note \(try context.parameters.require("id", as: UUID.self).lowercased)")
            }
            notes.add("POST", "", "Write a note", body: NoteBody.self, answers: (201, nil)) { _, body in
                .text(body.text)
            }
        }
        r.group("/v1/operator", .trusted(operators)) { ops in
            ops.add("DELETE", "/notes/{n}", "Remove a note", answers: (204, nil), also: [.refusal(409, "Still in use")]) { context in
                .text("removed \(try context.parameters.require("n", as: Int.self))")
            }
        }
        return r
    }

    func call(_ r: Router, _ method: String, _ path: String, headers: [String: String] = [:], body: String? = nil,
              query: [String: String] = [:]) throws -> Response {
        guard case .found(let route, let params) = r.match(method: method, path: path) else { return Response(status: 404) }
        var request = Request(method: method, path: path, query: query, headers: headers, body: Array((body ?? "").utf8))
        request.pathParameters = params
        request.declaredQuery = route.query
        do { return try Router.invoke(route, request) } catch let error as HTTPError { return Response(status: error.status) }
    }

    func testAGroupsPrefixAndAccessGoOnEachOfItsRoutes() throws {
        let r = try router()
        let id = UUID()
        XCTAssertEqual(String(decoding: try call(r, "GET", "/v1/notes/\(id.lowercased)").body, as: UTF8.self), "note \(id.lowercased)")
        XCTAssertEqual(try call(r, "GET", "/v1/notes/not-a-uuid").status, 404, "a malformed id names nothing")
        XCTAssertEqual(try call(r, "GET", "/v1/notes/\(id.lowercased)", query: ["limit": "9"]).status, 400, "the declared query is checked")
        XCTAssertEqual(try call(r, "POST", "/v1/notes", headers: ["content-type": "application/json"], body: #"{"text":"hi"}"#).status, 200)
        XCTAssertEqual(try call(r, "DELETE", "/v1/operator/notes/3").status, 401, "the group's credential is required")
        let removed = try call(r, "DELETE", "/v1/operator/notes/3", headers: ["authorization": "Bearer " + String(repeating: "k", count: 40)])
        XCTAssertEqual(String(decoding: removed.body, as: UTF8.self), "removed 3")
    }

    func testEachRouteDocumentsWhatItsOneCallDeclared() throws {
        let routes = try router().routes
        let get = try XCTUnwrap(routes.first { $0.method == "GET" })
        XCTAssertEqual(get.pattern, "/v1/notes/{id}")
        XCTAssertEqual(get.query.map(\.name), ["limit"])
        XCTAssertEqual(routes.first { $0.method == "POST" }?.requestSchema != nil, true)
        XCTAssertEqual(routes.first { $0.method == "DELETE" }?.security, ["operator"])
        XCTAssertEqual(routes.first { $0.method == "DELETE" }?.refusals.map(\.status), [409])
        XCTAssertEqual(get.security, [])
    }
}
