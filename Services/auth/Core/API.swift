import Foundation
import Models
import ServiceKit

// MARK: - Request bodies

struct SignupBody: RequestBody {
    static let schema = Schema.object([
        "username": .required(Check.usernameSchema), "email": .required(Check.emailSchema),
        "password": .required(Check.passwordSchema), "fullName": .required(.text(max: 100)),
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
        "fullName": .absentOrValue(.text(max: 100)), "email": .absentOrValue(Check.emailSchema),
        "username": .absentOrValue(Check.usernameSchema), "avatarMediaId": .optional(.uuid),
    ])
    let fullName: String?
    let email: String?
    let username: String?
    let avatarMediaId: Patch<UUID>

    enum CodingKeys: String, CodingKey { case fullName, email, username, avatarMediaId }
    init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        fullName = try c.decodeIfPresent(String.self, forKey: .fullName)
        email = try c.decodeIfPresent(String.self, forKey: .email)
        username = try c.decodeIfPresent(String.self, forKey: .username)
        avatarMediaId = try c.decode(Patch<UUID>.self, forKey: .avatarMediaId)
    }
}

struct GoogleBody: RequestBody {
    static let schema = Schema.object(["idToken": .required(.string(min: 1, max: 8192))])
    let idToken: String
}

struct ChangePasswordBody: RequestBody {
    static let schema = Schema.object(["currentPassword": .required(.string()), "newPassword": .required(Check.passwordSchema)])
    let currentPassword: String
    let newPassword: String
}

// MARK: - Responses

struct UserView: Encodable {
    let id: String
    let username: String
    let email: String
    let fullName: String
    let avatarMediaId: String?
    let createdAt: String
    let updatedAt: String

    init(_ u: UserRecord) {
        id = u.id.lowercased; username = u.username; email = u.email; fullName = u.fullName
        avatarMediaId = u.avatarMediaId?.lowercased
        createdAt = Timestamp.format(u.createdAt); updatedAt = Timestamp.format(u.updatedAt)
    }

    func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id); try c.encode(username, forKey: .username); try c.encode(email, forKey: .email)
        try c.encode(fullName, forKey: .fullName); try c.encode(avatarMediaId, forKey: .avatarMediaId)
        try c.encode(createdAt, forKey: .createdAt); try c.encode(updatedAt, forKey: .updatedAt)
    }
    enum CodingKeys: String, CodingKey { case id, username, email, fullName, avatarMediaId, createdAt, updatedAt }
}

struct SessionView: Encodable {
    let user: UserView
    let accessToken: String
    let refreshToken: String
    let tokenType = "Bearer"
    let expiresIn: Int
    /// Names this device in later logins (sign-up and login only).
    var deviceToken: String?
}

struct StreamTicketView: Encodable {
    let ticket: String
    let expiresIn = JWT.maxTicketLifetime
}

// MARK: - Schemas for the OpenAPI document

enum Schemas {
    static let user = """
        {"type":"object","required":["id","username","email","fullName","avatarMediaId","createdAt","updatedAt"],
         "additionalProperties":false,
         "properties":{"id":{"type":"string","format":"uuid"},"username":{"type":"string","pattern":"^[a-z0-9_.]{3,32}$"},
         "email":{"type":"string","format":"email"},"fullName":{"type":"string","minLength":1,"maxLength":100},
         "avatarMediaId":{"type":["string","null"],"format":"uuid"},
         "createdAt":{"type":"string","format":"date-time"},"updatedAt":{"type":"string","format":"date-time"}}}
        """
    static let session = """
        {"type":"object","required":["user","accessToken","refreshToken","tokenType","expiresIn"],"additionalProperties":false,
         "properties":{"user":\(user),"accessToken":{"type":"string"},"refreshToken":{"type":"string"},
         "tokenType":{"const":"Bearer"},"expiresIn":{"type":"integer"},"deviceToken":{"type":"string"}}}
        """
    static let revokedSessions = """
        {"type":"object","required":["sessions"],"additionalProperties":false,"properties":{"sessions":{"type":"array",
         "items":{"type":"object","required":["sessionId","revokedAt"],"additionalProperties":false,
         "properties":{"sessionId":{"type":"string","format":"uuid"},"revokedAt":{"type":"string","format":"date-time"}}}}}}
        """
    static let streamTicket = """
        {"type":"object","required":["ticket","expiresIn"],"additionalProperties":false,
         "properties":{"ticket":{"type":"string"},"expiresIn":{"type":"integer","minimum":1}}}
        """
    static let jwks = """
        {"type":"object","required":["keys"],"properties":{"keys":{"type":"array","items":{"type":"object",
         "required":["kty","crv","kid","x"],"properties":{"kty":{"const":"OKP"},"crv":{"const":"Ed25519"},
         "alg":{"const":"EdDSA"},"use":{"const":"sig"},"kid":{"type":"string"},"x":{"type":"string"}}}}}}
        """
}
