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
            let path = route.pattern.split(separator: "/").filter { $0.hasPrefix("{") }.map { p -> [String: Any] in
                ["name": String(p.dropFirst().dropLast()), "in": "path", "required": true, "schema": ["type": "string"]]
            }
            let query = route.query.map { q -> [String: Any] in
                ["name": q.name, "in": q.inHeader ? "header" : "query", "required": false, "description": q.description, "schema": parse(q.schema) ?? [:]]
            }
            let headers = route.idempotent ? [["$ref": "#/components/parameters/IdempotencyKey"]] : []
            if !(path + query + headers).isEmpty { op["parameters"] = path + query + headers }
            op["security"] = route.security.map { [$0: [String]()] }
            // A body limit other than the JSON default (an upload's 10 MiB): the gateway's route table sizes its
            // own limit from it.
            if route.bodyLimit != defaultBodyLimit { op["x-max-body-bytes"] = route.bodyLimit }
            if let schema = route.requestSchema.flatMap(parse) {
                op["requestBody"] = ["required": true, "content": ["application/json": ["schema": schema]]]
            }
            var success: [String: Any] = ["description": "Success"]
            if let schema = route.response.schema.flatMap(parse) {
                success["content"] = ["application/json": ["schema": schema]]
            }
            if route.idempotent { success["headers"] = ["Idempotent-Replayed": ["$ref": "#/components/headers/IdempotentReplayed"]] }
            var responses: [String: Any] = [String(route.response.status): success]
            let refusals = errors(route)
            for other in route.alternatives {
                let description = other.description ?? (other.status < 300 ? "Success" : refusals.first { $0.0 == other.status }?.1 ?? "Refused")
                var answer = responses[String(other.status)] as? [String: Any] ?? ["description": description]
                if let type = other.contentType {
                    var content = answer["content"] as? [String: Any] ?? [:]
                    content[type] = other.schema.flatMap(parse).map { ["schema": $0] } ?? [String: Any]()
                    answer["content"] = content
                }
                if !other.headers.isEmpty {
                    var headers = answer["headers"] as? [String: Any] ?? [:]
                    for (name, says) in other.headers { headers[name] = ["description": says, "schema": ["type": "string"]] }
                    answer["headers"] = headers
                }
                responses[String(other.status)] = answer
            }
            for (status, description) in refusals {
                // A refusal with a body of the route's own (readiness's 503) keeps it.
                var answer = responses[String(status)] as? [String: Any]
                    ?? ["description": description, "content": ["application/json": ["schema": ["$ref": "#/components/schemas/Error"]]]]
                if status == 429 || status == 503 { answer["headers"] = ["Retry-After": ["$ref": "#/components/headers/RetryAfter"]] }
                responses[String(status)] = answer
            }
            op["responses"] = responses
            paths[route.pattern, default: [:]][route.method.lowercased()] = op
        }
        let idempotent = routes.contains(where: \.idempotent)
        var components: [String: Any] = [
            "securitySchemes": securitySchemes.filter { name, _ in routes.contains { $0.security.contains(name) } },
            "schemas": ["Error": parse(errorSchema)!],
            "headers": idempotent ? ["RetryAfter": retryAfter, "IdempotentReplayed": idempotentReplayed] : ["RetryAfter": retryAfter],
        ]
        if idempotent { components["parameters"] = ["IdempotencyKey": idempotencyKey] }
        return ["openapi": "3.1.0", "info": ["title": "\(service) service", "version": version, "description": headers],
                "paths": paths, "components": components]
    }

    /// What every route takes and answers beyond its own parameters.
    static let headers = "Every answer carries `X-Request-Id`: the request's own (1 to 128 characters of `[A-Za-z0-9._-]`), else one made "
        + "for it; the logs name the request by it. A W3C `traceparent` header is taken (else a trace is started) and carried "
        + "into every event the request causes."

    /// The header a route that `Router.idempotent` names takes, as `Idempotency` checks and keeps it, and the one its
    /// replays carry.
    static var idempotencyKey: [String: Any] { [
        "name": "Idempotency-Key", "in": "header", "required": false,
        "description": "A key of the client's choosing (a UUID, say): a retry with the same key by the same caller within "
            + "\(Idempotency.keptHours) hours is answered as the first time and changes nothing; the same key with another request is 409.",
        "schema": ["type": "string", "minLength": Idempotency.keyLength.lowerBound, "maxLength": Idempotency.keyLength.upperBound,
                   "pattern": Idempotency.keyPattern],
    ] }
    /// What every 429 and 503 carries (`HTTPError.rateLimited`, `.unavailable`, readiness).
    static var retryAfter: [String: Any] { [
        "description": "Seconds to wait before trying again.", "required": true,
        "schema": ["type": "string", "pattern": "^[0-9]+$"],
    ] }
    static var idempotentReplayed: [String: Any] { [
        "description": "`true` on the answer to a retry, which is the first answer again.",
        "schema": ["type": "string", "enum": ["true"]],
    ] }

    /// The JSON bytes of the document.
    public static func json(service: String, routes: [Route]) -> [UInt8] {
        let doc = document(service: service, routes: routes)
        return Array((try? JSONSerialization.data(withJSONObject: doc, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data())
    }

    /// The error answers a route can give, from what it takes and what guards it: the kit gives each of them in one
    /// place (validation, authentication, the domain's refusals, limits, readiness).
    static func errors(_ route: Route) -> [(Int, String)] {
        let hasPath = route.pattern.contains("{")
        let writes = route.method != "GET"
        var errors: [(Int, String)] = [(503, "Not ready, or a dependency is down (Retry-After)")]
        if writes || hasPath || !route.query.isEmpty { errors.append((400, "Invalid input; `field` names it")) }
        // Public writes include the ones that take credentials in their body (login, refresh).
        if !route.security.isEmpty || writes { errors.append((401, "Missing or invalid credentials")) }
        if hasPath || route.security.contains("bearer") { errors.append((404, "Not found, or not yours to see")) }
        if route.security.contains("bearer") && writes { errors.append((403, "Yours to see, not to change")) }
        if route.security.contains("signedURL") { errors.append((403, "A changed or expired signed URL")) }
        if writes { errors.append((409, "Conflicts with the current state")); errors.append((429, "Too many attempts (Retry-After)")) }
        if writes { errors.append((413, "Body too large")); errors.append((415, "Not a type this route takes")) }
        // The route's own word on a refusal (why a reset is limited) replaces the kit's.
        let own = route.refusals.map { ($0.status, $0.description) }
        return errors.filter { kit in !own.contains { $0.0 == kit.0 } } + own
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
                     "description": "The operator token (OPERATOR_TOKEN) of the operators' tools."],
        "fleet": ["type": "http", "scheme": "bearer",
                  "description": "A fleet gateway's token (FLEET_TOKEN): its couriers' fixes and acceptances and the map, nothing else."],
        "service": ["type": "http", "scheme": "bearer",
                    "description": "The service token (SERVICE_TOKEN) this platform's services share between them."],
        "signedURL": ["type": "apiKey", "in": "query", "name": "sig",
                      "description": "The signature of an image URL a view gave (with its exp and kid): loads the image without a token until it expires."],
        "streamTicket": ["type": "apiKey", "in": "query", "name": "ticket",
                         "description": "A single-use stream ticket from POST /v1/auth/stream-tickets, valid for a minute: how a browser's EventSource, which cannot send a header, opens a stream."],
    ] }

    /// The conventions' error body.
    public static let errorSchema = """
        {"type":"object","required":["error"],"properties":{"error":{"type":"object","required":["code","message"],
        "properties":{"code":{"type":"string"},"message":{"type":"string"},"field":{"type":"string"}}}}}
        """
}
