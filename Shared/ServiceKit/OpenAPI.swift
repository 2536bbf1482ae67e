import Foundation
import HTTP

/// Builds the OpenAPI 3.1 document from the route table itself, so no route can be missing from it.
public enum OpenAPI {
    /// The document for `routes` of `service`.
    public static func document(service: String, version: String = "1.0.0", routes: [Route]) -> [String: Any] {
        var paths: [String: [String: Any]] = [:]
        for route in routes {
            var op: [String: Any] = [
                "summary": route.summary,
                "operationId": operationId(route),
            ]
            let params = route.pattern.split(separator: "/").filter { $0.hasPrefix("{") }.map { p -> [String: Any] in
                ["name": String(p.dropFirst().dropLast()), "in": "path", "required": true, "schema": ["type": "string"]]
            }
            if !params.isEmpty { op["parameters"] = params }
            op["security"] = route.security.map { [[$0: [String]()]] } ?? [[String: [String]]]()
            if let schema = route.requestSchema.flatMap(parse) {
                op["requestBody"] = ["required": true, "content": ["application/json": ["schema": schema]]]
            }
            var success: [String: Any] = ["description": "Success"]
            if let schema = route.response.schema.flatMap(parse) {
                success["content"] = ["application/json": ["schema": schema]]
            }
            op["responses"] = [
                String(route.response.status): success,
                "default": ["description": "An error", "content": ["application/json": ["schema": ["$ref": "#/components/schemas/Error"]]]],
            ]
            paths[route.pattern, default: [:]][route.method.lowercased()] = op
        }
        return [
            "openapi": "3.1.0",
            "info": ["title": "\(service) service", "version": version],
            "paths": paths,
            "components": [
                "securitySchemes": securitySchemes.filter { name, _ in routes.contains { $0.security == name } },
                "schemas": ["Error": parse(errorSchema)!],
            ],
        ]
    }

    /// The JSON bytes of the document.
    public static func json(service: String, routes: [Route]) -> [UInt8] {
        let doc = document(service: service, routes: routes)
        return Array((try? JSONSerialization.data(withJSONObject: doc, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data())
    }

    static func parse(_ text: String) -> Any? {
        try? JSONSerialization.jsonObject(with: Data(text.utf8))
    }

    static func operationId(_ route: Route) -> String {
        route.method.lowercased() + route.pattern.split(separator: "/").map { part in
            let clean = part.replacingOccurrences(of: "{", with: "by_").replacingOccurrences(of: "}", with: "")
            return clean.split(separator: "_").map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
                .replacingOccurrences(of: "-", with: "")
        }.joined()
    }

    /// Every scheme a route may name; a document lists those its routes use.
    static var securitySchemes: [String: Any] { [
        "bearer": ["type": "http", "scheme": "bearer", "bearerFormat": "JWT (EdDSA)",
                   "description": "A user's access token from auth."],
        "operator": ["type": "http", "scheme": "bearer",
                     "description": "The operator token (OPERATOR_TOKEN) of trusted tools such as a fleet gateway."],
        "service": ["type": "http", "scheme": "bearer",
                    "description": "The service token (SERVICE_TOKEN) this platform's services share between them."],
    ] }

    /// The conventions' error body.
    public static let errorSchema = """
        {"type":"object","required":["error"],"properties":{"error":{"type":"object","required":["code","message"],
        "properties":{"code":{"type":"string"},"message":{"type":"string"},"field":{"type":"string"}}}}}
        """
}
