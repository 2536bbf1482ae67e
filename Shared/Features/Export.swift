import Foundation
import HTTP
import Postgres
import Web

/// A person's copy of their data (GDPR Articles 15 and 20): each service answers what it holds of them on
/// `GET /v1/internal/users/{id}/export`, for other services only (`SERVICE_TOKEN`; the gateway never routes
/// `/v1/internal/`), and auth gathers every answer into one archive (`GET /v1/users/me/export`).
public enum Export {
    public static let path = "/v1/internal/users/{id}/export"

    /// The JSON object a query builds (one row, one column `export`, from `json_build_object`), with each image the
    /// query lists under an `images` key given the signed URL that loads it (`media` signs), as the apps see them.
    public static func document(_ c: Connection, _ sql: SQL, media: MediaStore? = nil) throws -> [String: Any] {
        guard let text: String = try c.first(sql)?["export"],
              var object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else { return [:] }
        if let media, let images = object["images"] as? [[String: Any]] {
            object["images"] = images.map { image -> [String: Any] in
                var signed = image
                if let id = image["id"] as? String { signed["url"] = media.url(id) }
                return signed
            }
        }
        return object
    }
}

extension Router {
    /// The service's part of a person's export: `export` gives what it holds of the user in the path.
    public mutating func addExport(services: SharedSecret, _ export: @escaping @Sendable (UUID) throws -> [String: Any]) {
        guard services.isEnabled else { return }
        add("GET", Export.path, summary: "Services: what this service holds of a person, for their export", response: (200, nil),
            trusted: services) { request in
            let object = try export(try Validate.pathID(request))
            let body = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
            return Response(status: 200, headers: [("Content-Type", "application/json"), ("Cache-Control", "no-store")], body: Array(body))
        }
    }
}
