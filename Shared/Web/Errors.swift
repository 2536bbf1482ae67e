import Crypto
import Foundation
import HTTP
import Postgres

extension HTTPError {
    /// The response for any error a handler throws: HTTP errors as they are, a domain's refusals by their kind,
    /// database and broker outages and a full password-hashing queue as 503,
    /// constraint violations as 409/400; anything else is a bare 500 with nothing internal in it.
    public static func from(_ error: Error) -> HTTPError {
        switch error {
        case let e as HTTPError: return e
        case let e as any DomainError: return HTTPError(e)
        case is PasswordHasher.Busy: return .unavailable(retryAfter: 1)
        case let e as PostgresError:
            switch e.kind {
            case .unavailable: return .unavailable(retryAfter: 2)
            case .uniqueViolation: return .conflict("That already exists.")
            case .foreignKeyViolation: return .conflict("A referenced resource does not exist or is still in use.")
            case .checkViolation, .invalidValue: return .validation("A value is not valid.")
            case .serializationFailure: return .unavailable(retryAfter: 1)
            case .other, .decoding: return .internalError
            }
        default: return .internalError
        }
    }
}

/// What a service's domain refused, in its own terms: no HTTP in it. The kit turns it into a response in one place
/// (`HTTPError.from`), so the same rule gives the same answer from a handler, and a consumer or job can tell a
/// refusal from an outage.
public protocol DomainError: Error, Sendable {
    /// The kind of refusal.
    var refusal: Refusal { get }
    /// A sentence safe to show to the client.
    var message: String { get }
    /// The field it concerns, when there is one.
    var field: String? { get }
}

extension DomainError {
    public var field: String? { nil }
}

/// The kinds of refusal a domain knows, each with its status and code from the conventions.
public enum Refusal: Sendable, Equatable {
    /// The input breaks a rule (400 `validation_failed`).
    case invalid
    /// It does not exist, or the caller may not know it does (404).
    case notFound
    /// The caller is known but may not do this (403).
    case forbidden
    /// The state does not allow it now (409).
    case conflict
    /// Too many attempts (429 with `Retry-After`).
    case rateLimited(retryAfter: Int)
}

extension HTTPError {
    /// The response for a domain's refusal.
    init(_ error: any DomainError) {
        switch error.refusal {
        case .invalid: self = .validation(error.message, field: error.field)
        case .notFound: self = .notFound(error.message)
        case .forbidden: self = HTTPError(403, "forbidden", error.message, field: error.field)
        case .conflict: self = .conflict(error.message, field: error.field)
        case .rateLimited(let seconds): self = .rateLimited(retryAfter: seconds)
        }
    }
}
