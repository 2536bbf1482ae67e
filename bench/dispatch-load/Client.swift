import Foundation
import WireClient

/// A JSON client on one keep-alive connection: one per thread. Given several instances (URLs separated by commas),
/// a thread starts on the `start`th and moves to the next when its instance does not answer, as a load balancer
/// would; the request is sent again there (every POST carries an idempotency key of its own, so what the dead
/// instance committed is answered, not made twice; an error on a request sent again is counted apart, as resent).
final class API {
    private let clients: [HTTPClient]
    private var current: Int

    init(_ bases: String, start: Int = 0) {
        clients = bases.split(separator: ",").map { HTTPClient(url: String($0), timeout: 30)! }
        current = start % clients.count
    }

    struct Reply {
        let status: Int
        let json: [String: Any]
        let ms: Double
        /// Sent again to another instance after its own did not answer: the first may have done it.
        let resent: Bool
        subscript(key: String) -> Any? { json[key] }
    }

    func call(_ method: String, _ path: String, json: Any? = nil, raw: [UInt8]? = nil, token: String? = nil,
              headers extra: [String: String] = [:]) throws -> Reply {
        var headers = extra
        if let token { headers["Authorization"] = "Bearer \(token)" }
        if method == "POST" { headers["Idempotency-Key"] = UUID().uuidString }  // the same for each instance it goes to
        var body: [UInt8] = []
        if let json {
            body = Array(try JSONSerialization.data(withJSONObject: json))
            headers["Content-Type"] = "application/json"
        } else if let raw {
            body = raw
        }
        let start = DispatchTime.now().uptimeNanoseconds
        var response: ClientResponse?, resent = false
        for attempt in 0..<clients.count {
            do {
                response = try clients[current].request(method, path, headers: headers, body: body)
                break
            } catch {
                if attempt == clients.count - 1 { throw error }
                current = (current + 1) % clients.count
                resent = true
            }
        }
        guard let response else { throw RunError("no instance answered") }
        let ms = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
        let object = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any] ?? [:]
        return Reply(status: response.status, json: object, ms: ms, resent: resent)
    }
}

extension API.Reply {
    /// "POST /v1/parcels 409 conflict", for counting errors by kind; "(resent)" when the request went to another
    /// instance after its own did not answer.
    func kind(_ method: String, _ route: String) -> String {
        let code = (json["error"] as? [String: Any])?["code"] as? String ?? "-"
        return "\(method) \(route) \(status) \(code)\(resent ? " (resent)" : "")"
    }
}
