import Foundation
import Web
import HTTP

/// What the account rules refuse.
enum AccountError: DomainError, Equatable {
    case notFound
    case usernameTaken
    case emailTaken
    case invalidEmail

    var refusal: Refusal {
        switch self {
        case .notFound: return .notFound
        case .usernameTaken, .emailTaken: return .conflict
        case .invalidEmail: return .invalid
        }
    }

    var message: String {
        switch self {
        case .notFound: return "Not found."
        case .usernameTaken: return "That username is taken."
        case .emailTaken: return "That email address is already registered."
        case .invalidEmail: return "email must be a valid email address."
        }
    }

    var field: String? {
        switch self {
        case .notFound: return nil
        case .usernameTaken: return "username"
        case .emailTaken, .invalidEmail: return "email"
        }
    }
}

/// Auth's own field rules.
enum Check {
    /// Usernames: 3 to 32 of a-z, 0-9, _ and . (upper case is accepted and stored lower-cased).
    static let usernameSchema = Schema.string(min: 3, max: 32, pattern: "^[A-Za-z0-9_.]+$",
                                              rule: "username must be 3 to 32 of a-z, 0-9, _ and .")
    /// Email addresses: at most 254 bytes here; `email` checks the rest.
    /// A phone number as people write it: digits, an optional leading +, spaces, dashes and brackets.
    static let phoneSchema = Schema.string(min: 3, max: 32, pattern: "^\\+?[0-9][0-9 ()-]*$", rule: "phone must be a phone number.")
    static let emailSchema = Schema.string(max: 254, bytes: true, rule: "email must be a valid email address.")
    /// Full names: up to 100 characters of one line.
    static let fullNameSchema = Schema.text(max: 100)
    /// Passwords: at least 10 characters, at most 1024 bytes.
    static let passwordSchema = Schema.string(min: 10, max: 1024, bytes: true)

    /// A syntactically valid address, trimmed; else `invalidEmail`.
    static func email(_ value: String) throws -> String {
        let email = value.trimmingCharacters(in: .whitespaces)
        let parts = email.split(separator: "@", omittingEmptySubsequences: false)
        let valid = email.utf8.count <= 254 && parts.count == 2 && (1...64).contains(parts[0].utf8.count)
            && parts[0].unicodeScalars.allSatisfy { $0.isASCII && $0.value > 0x20 && $0 != "(" && $0 != ")" && $0 != "," && $0 != ";" && $0 != "<" && $0 != ">" && $0 != "\"" && $0 != "\\" && $0 != "[" && $0 != "]" }
            && parts[1].split(separator: ".", omittingEmptySubsequences: false).count >= 2
            && parts[1].split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
                !label.isEmpty && label.count <= 63 && !label.hasPrefix("-") && !label.hasSuffix("-")
                    && label.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "-" }
            }
        guard valid else { throw AccountError.invalidEmail }
        return email
    }
}

/// How failed logins slow later ones (see `AuthHandlers.login`).
struct LoginThrottle: Sendable {
    /// `LOGIN_ADDRESS_MAX_FAILURES`: failures from one address within 15 minutes before it is refused (default 100).
    let addressFailures: Int
    /// `TRUSTED_PROXIES`.
    let trustedProxies: AddressSet
    /// Failures of an account before each attempt must wait.
    static let accountFailures = 10
    /// Failures through one device token before it is forgotten.
    static let deviceFailures = 10

    /// Seconds to wait before the next attempt, or nil when it may go ahead.
    func wait(device: Bool, _ recent: (account: Int, client: Int, sinceAccount: Double, clientRetryAfter: Int)) -> Int? {
        if device { return nil }  // its own failures end it (forgotten after `deviceFailures`)
        if recent.client >= addressFailures { return max(1, recent.clientRetryAfter) }
        guard recent.account >= Self.accountFailures else { return nil }
        let delay = Double(min(900, 1 << min(recent.account - Self.accountFailures, 10)))
        let wait = Int((delay - recent.sinceAccount).rounded(.up))
        return wait > 0 ? wait : nil
    }
}
