import Foundation
import WireClient

/// A JSON client on one keep-alive connection: one per thread.
final class API {
    private let http: HTTPClient

    init(_ base: String) { http = HTTPClient(url: base, timeout: 30)! }

    struct Reply {
        let status: Int
        let json: [String: Any]
        let ms: Double
        subscript(key: String) -> Any? { json[key] }
    }

    func call(_ method: String, _ path: String, json: Any? = nil, raw: [UInt8]? = nil, token: String? = nil,
              headers extra: [String: String] = [:]) throws -> Reply {
        var headers = extra
        if let token { headers["Authorization"] = "Bearer \(token)" }
        var body: [UInt8] = []
        if let json {
            body = Array(try JSONSerialization.data(withJSONObject: json))
            headers["Content-Type"] = "application/json"
        } else if let raw {
            body = raw
        }
        let start = DispatchTime.now().uptimeNanoseconds
        let response = try http.request(method, path, headers: headers, body: body)
        let ms = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
        let object = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any] ?? [:]
        return Reply(status: response.status, json: object, ms: ms)
    }
}

extension API.Reply {
    /// "POST /v1/parcels 409 conflict", for counting errors by kind.
    func kind(_ method: String, _ route: String) -> String {
        let code = (json["error"] as? [String: Any])?["code"] as? String ?? "-"
        return "\(method) \(route) \(status) \(code)"
    }
}
