import Foundation
import Synchronization
import HTTP
import WireClient
import XCTest

/// A response with its body parsed as JSON (when it is JSON).
struct APIResponse {
    let status: Int
    let headers: [String: String]
    let body: [UInt8]
    var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:] }
    var errorCode: String? { (json["error"] as? [String: Any])?["code"] as? String }
    var errorField: String? { (json["error"] as? [String: Any])?["field"] as? String }
    subscript(_ key: String) -> Any? { json[key] }
}

/// Talks to one service over HTTP as a client app would.
///
/// `@unchecked Sendable`: its connection is used under `busy`.
final class APIClient: @unchecked Sendable {
    let http: HTTPClient
    let port: Int
    private let busy = NSLock()

    init(port: Int) {
        self.port = port
        http = HTTPClient(port: port, timeout: 30)
        Self.registry.withLock { $0.append(Weak(client: self)); $0.removeAll { $0.client == nil } }
    }

    /// Closes every idle kept connection to `port`, as a client app going away would. A stopping service gives an
    /// idle connection a second to send one more request before it closes it (`HTTPServer.stop`); the tests'
    /// clients have none to send, so they say so at once rather than have every stop wait.
    static func closeIdle(port: Int) {
        for client in registry.withLock({ $0.compactMap(\.client) }) where client.port == port && client.busy.try() {
            client.http.disconnect()
            client.busy.unlock()
        }
    }

    private struct Weak { weak var client: APIClient? }
    private static let registry = Mutex<[Weak]>([])

    func send(_ method: String, _ path: String, json: Any? = nil, raw: [UInt8]? = nil, token: String? = nil,
              headers: [String: String] = [:]) throws -> APIResponse {
        var h = headers
        var body: [UInt8] = []
        if let json {
            body = Array(try JSONSerialization.data(withJSONObject: json))
            if h["Content-Type"] == nil { h["Content-Type"] = "application/json" }
        } else if let raw {
            body = raw
        }
        if let token { h["Authorization"] = "Bearer \(token)" }
        busy.lock()
        defer { busy.unlock() }
        let r = try http.request(method, path, headers: h, body: body)
        return APIResponse(status: r.status, headers: r.headers, body: r.body)
    }

    func get(_ path: String, token: String? = nil) throws -> APIResponse { try send("GET", path, token: token) }
    func post(_ path: String, _ json: Any? = nil, token: String? = nil, headers: [String: String] = [:]) throws -> APIResponse {
        try send("POST", path, json: json ?? [String: Any](), token: token, headers: headers)
    }
    func patch(_ path: String, _ json: Any, token: String? = nil) throws -> APIResponse {
        try send("PATCH", path, json: json, token: token)
    }

    /// Signs up a fresh user and returns the session response.
    func signup(_ name: String = "u" + String(UUID().uuidString.lowercased().prefix(12)).replacingOccurrences(of: "-", with: ""),
                password: String = "correct horse battery") throws -> APIResponse {
        try post("/v1/auth/signup", ["username": name, "email": "\(name)@example.com", "password": password, "fullName": "Test \(name)"])
    }
}

extension APIResponse {
    var accessToken: String { json["accessToken"] as? String ?? "" }
    var refreshToken: String { json["refreshToken"] as? String ?? "" }
    var userId: String { (json["user"] as? [String: Any])?["id"] as? String ?? json["id"] as? String ?? "" }
}

/// Asserts the conventions' error shape and a 4xx status.
/// GET of an absolute URL a view gave (a signed image URL), as a browser or a mail client would: no token.
func load(_ url: Any?, headers: [String: String] = [:]) throws -> APIResponse {
    guard let text = url as? String, let u = URLComponents(string: text), u.host == "127.0.0.1", let port = u.port else {
        throw TestFailure("not a URL on this machine: \(String(describing: url))")
    }
    return try APIClient(port: port).send("GET", u.percentEncodedPath + (u.percentEncodedQuery.map { "?" + $0 } ?? ""), headers: headers)
}

/// `url` with its signature changed (the last character of `sig`).
func tampered(_ url: Any?) -> String {
    let text = url as? String ?? ""
    return String(text.dropLast()) + (text.hasSuffix("A") ? "B" : "A")
}

func assertClientError(_ r: APIResponse, _ status: Int? = nil, code: String? = nil, _ message: String = "",
                       file: StaticString = #filePath, line: UInt = #line) {
    if let status { XCTAssertEqual(r.status, status, "\(message): \(String(decoding: r.body, as: UTF8.self))", file: file, line: line) }
    XCTAssert((400..<500).contains(r.status), "\(message): expected 4xx, got \(r.status)", file: file, line: line)
    let error = r.json["error"] as? [String: Any]
    XCTAssertNotNil(error?["code"] as? String, "\(message): no error.code in \(String(decoding: r.body, as: UTF8.self))", file: file, line: line)
    XCTAssertNotNil(error?["message"] as? String, "\(message): no error.message", file: file, line: line)
    if let code { XCTAssertEqual(error?["code"] as? String, code, message, file: file, line: line) }
}
