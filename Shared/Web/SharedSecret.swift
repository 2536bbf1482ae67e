import Crypto
import HTTP
import Runtime

/// A credential shared with trusted callers and presented as a bearer token: the operator token (`OPERATOR_TOKEN`,
/// for tools such as a fleet gateway or a load tester, on `/v1/operator/...`) and the service token
/// (`SERVICE_TOKEN`, between this platform's services, on `/v1/internal/...`). At least 32 characters. Unset, the
/// routes it guards are not added (404, and absent from the OpenAPI document); a wrong or missing token gets 401.
/// Only its digest is compared, in constant time; the token itself is kept for the callers that send it.
public struct SharedSecret: Sendable {
    /// The environment variable.
    public let variable: String
    /// The OpenAPI security scheme of the routes it guards (`operator`, `service`).
    public let scheme: String
    /// The token, for sending; nil when unset.
    public let token: String?
    private let digest: [UInt8]?

    public init(_ environment: Environment, variable: String, scheme: String) throws {
        self.variable = variable; self.scheme = scheme
        token = environment.optional(variable)
        guard let token else { digest = nil; return }
        guard token.count >= 32 else {
            throw ConfigError(variable: variable, problem: "must be at least 32 characters (got \(token.count))")
        }
        digest = sha256(Array(token.utf8))
    }

    /// `OPERATOR_TOKEN`.
    public static func operatorToken(_ environment: Environment) throws -> SharedSecret {
        try SharedSecret(environment, variable: "OPERATOR_TOKEN", scheme: "operator")
    }

    /// `FLEET_TOKEN`: a fleet gateway's, which reaches its routes and nothing else an operator does.
    public static func fleetToken(_ environment: Environment) throws -> SharedSecret {
        try SharedSecret(environment, variable: "FLEET_TOKEN", scheme: "fleet")
    }

    /// `SERVICE_TOKEN`.
    public static func serviceToken(_ environment: Environment) throws -> SharedSecret {
        try SharedSecret(environment, variable: "SERVICE_TOKEN", scheme: "service")
    }

    /// Whether the routes it guards exist.
    public var isEnabled: Bool { digest != nil }

    /// Passes a request that carries the token; else a 401 (a 404 while the secret is unset).
    public func check(_ request: Request) throws {
        guard let digest else { throw HTTPError.notFound() }
        let given = sha256(Array(try bearerToken(request).utf8))
        guard constantTimeEquals(given, digest) else { throw HTTPError.unauthenticated("A valid \(variable) is required.") }
    }
}
