import Crypto
import HTTP

/// The operator credential: a shared secret (`OPERATOR_TOKEN`, at least 32 characters) that trusted tools (a fleet
/// gateway, a load tester) present as a bearer token on `/v1/operator/...` routes. Unset, those routes are not added
/// (404, and absent from the OpenAPI document); a wrong or missing token gets 401. Only its digest is kept, and it is
/// compared in constant time.
public struct OperatorCredential: Sendable {
    private let digest: [UInt8]?

    public init(_ environment: Environment) throws {
        guard let token = environment.optional("OPERATOR_TOKEN") else { digest = nil; return }
        guard token.count >= 32 else {
            throw ConfigError(variable: "OPERATOR_TOKEN", problem: "must be at least 32 characters (got \(token.count))")
        }
        digest = sha256(Array(token.utf8))
    }

    /// Whether operator routes are enabled.
    public var isEnabled: Bool { digest != nil }

    /// Passes a request that carries the operator token; else a 401 (a 404 while the credential is off).
    public func check(_ request: Request) throws {
        guard let digest else { throw HTTPError.notFound() }
        let given = sha256(Array(try bearerToken(request).utf8))
        guard constantTimeEquals(given, digest) else { throw HTTPError.unauthenticated("A valid operator token is required.") }
    }
}
