import Foundation
import Models
import Web

// What the routes take: each request body described once (`RequestBody`).

struct SignupBody: RequestBody {
    static let schema = Schema.object([
        "username": .required(Check.usernameSchema), "email": .required(Check.emailSchema),
        "password": .required(Check.passwordSchema), "fullName": .required(Check.fullNameSchema),
    ])
    let username: String
    let email: String
    let password: String
    let fullName: String
}

struct LoginBody: RequestBody {
    /// Lengths are not checked here: a login with an impossible name or password is a 401, like any failed login.
    static let schema = Schema.object([
        "username": .absentOrValue(.string()), "email": .absentOrValue(.string()), "password": .required(.string()),
        "deviceToken": .absentOrValue(.string()),
    ])
    let username: String?
    let email: String?
    let password: String
    /// The `deviceToken` of an earlier sign-in on this device: others' failed logins do not slow this one.
    let deviceToken: String?
}

struct RefreshBody: RequestBody {
    static let schema = Schema.object(["refreshToken": .required(.string())])
    let refreshToken: String
}

struct UpdateMeBody: RequestBody {
    static let schema = Schema.object([
        "fullName": .absentOrValue(Check.fullNameSchema), "email": .absentOrValue(Check.emailSchema),
        "username": .absentOrValue(Check.usernameSchema), "avatarMediaId": .optional(.uuid),
        "phone": .optional(Check.phoneSchema), "postalAddress": .optional(.text(max: 300, multiline: true)),
    ])
    let fullName: String?
    let email: String?
    let username: String?
    let avatarMediaId: Patch<UUID>
    let phone: Patch<String>
    let postalAddress: Patch<String>

    enum CodingKeys: String, CodingKey { case fullName, email, username, avatarMediaId, phone, postalAddress }
    init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        fullName = try c.decodeIfPresent(String.self, forKey: .fullName)
        email = try c.decodeIfPresent(String.self, forKey: .email)
        username = try c.decodeIfPresent(String.self, forKey: .username)
        avatarMediaId = try c.decode(Patch<UUID>.self, forKey: .avatarMediaId)
        phone = try c.decode(Patch<String>.self, forKey: .phone)
        postalAddress = try c.decode(Patch<String>.self, forKey: .postalAddress)
    }
}

struct GoogleBody: RequestBody {
    static let schema = Schema.object(["idToken": .required(.string(min: 1, max: 8192))])
    let idToken: String
}

/// Sign in with Apple, as the app gets it from `ASAuthorizationAppleIDCredential`: the identity token, the raw nonce
/// whose SHA-256 the app put in the request, the authorization code, and (the first time only: Apple gives it once)
/// the person's name, whole or in parts.
struct AppleBody: RequestBody {
    static let schema = Schema.object([
        "idToken": .required(.string(min: 1, max: 8192)), "nonce": .required(.string(min: 1, max: 256)),
        "authorizationCode": .required(.string(min: 1, max: 1024)), "fullName": .optional(Check.fullNameSchema),
        "givenName": .optional(.text(max: 100)), "familyName": .optional(.text(max: 100)),
    ])
    let idToken: String
    let nonce: String
    let authorizationCode: String
    let fullName: String?
    let givenName: String?
    let familyName: String?

    /// The name the app sent, if any.
    var name: String? {
        let name = fullName ?? [givenName, familyName].compactMap { $0 }.joined(separator: " ")
        let trimmed = name.trimmingCharacters(in: .whitespacesAndNewlines)
        return trimmed.isEmpty ? nil : String(trimmed.prefix(100))
    }
}

/// Deleting one's account takes the password again, or for an account that signs in with Google or Apple only, a
/// fresh ID token of theirs (with Apple's, the raw `nonce` of its sign-in).
struct DeleteAccountBody: RequestBody {
    static let schema = Schema.object(["password": .optional(.string()), "idToken": .optional(.string(min: 1, max: 8192)),
                                       "nonce": .optional(.string(min: 1, max: 256))])
    let password: String?
    let idToken: String?
    let nonce: String?
}

struct PasswordResetBody: RequestBody {
    /// Any string: an address nobody has gets the same answer as one somebody has.
    static let schema = Schema.object(["email": .required(.string(max: 254))])
    let email: String
}

struct NewPasswordBody: RequestBody {
    static let schema = Schema.object(["token": .required(.string(max: 64)), "newPassword": .required(Check.passwordSchema)])
    let token: String
    let newPassword: String
}

struct EmailTokenBody: RequestBody {
    static let schema = Schema.object(["token": .required(.string(max: 64))])
    let token: String
}

struct ChangePasswordBody: RequestBody {
    static let schema = Schema.object(["currentPassword": .required(.string()), "newPassword": .required(Check.passwordSchema)])
    let currentPassword: String
    let newPassword: String
}
