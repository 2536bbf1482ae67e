import Foundation
import ServiceKit

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
    static let emailSchema = Schema.string(max: 254, bytes: true, rule: "email must be a valid email address.")
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
