import Web

/// What notify's rules refuse.
enum NotifyError: DomainError, Equatable {
    /// A value the rules do not take (a push service this server does not send to, a token of the wrong form).
    case invalid(String, field: String)
    /// A limit of the caller's reached.
    case conflict(String)

    var refusal: Refusal {
        switch self {
        case .invalid: return .invalid
        case .conflict: return .conflict
        }
    }

    var message: String {
        switch self {
        case .invalid(let m, _), .conflict(let m): return m
        }
    }

    var field: String? { if case .invalid(_, let field) = self { return field }; return nil }
}
