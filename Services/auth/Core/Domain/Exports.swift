import Features
import Models
import Foundation
import HTTP
import Postgres
import Runtime
import Web

/// A person's copy of everything the backend holds of them, as one archive: auth's part, and each service's
/// (`EXPORT_SOURCES`, asked with `SERVICE_TOKEN` on `/v1/internal/users/{id}/export`). A service that does not answer
/// is named under `unavailable` rather than failing the whole archive.
struct Exports: Sendable {
    /// `EXPORT_SOURCES`: `name=http://host:port`, comma-separated.
    let sources: [(name: String, url: URL)]
    let token: String?

    init(_ environment: Environment, token: String?) throws {
        var sources: [(String, URL)] = []
        for entry in (environment.optional("EXPORT_SOURCES") ?? "").split(separator: ",") {
            let parts = entry.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, !parts[0].isEmpty, let url = URL(string: parts[1]), ["http", "https"].contains(url.scheme ?? "") else {
                throw ConfigError(variable: "EXPORT_SOURCES", problem: "must be name=http://host:port entries, comma-separated")
            }
            sources.append((parts[0], url))
        }
        self.sources = sources
        self.token = token
    }

    /// The archive of `user`, with auth's part `account`.
    func archive(of user: UUID, account: [String: Any]) -> [String: Any] {
        var archive: [String: Any] = ["exportedAt": Timestamp.format(Date()), "account": account]
        var unavailable: [String] = []
        for source in sources {
            guard let token, let (status, body) = Fetch.get(source.url.appendingPathComponent("v1/internal/users/\(user.lowercased)/export"),
                                                             headers: ["Authorization": "Bearer \(token)"], timeout: 10),
                  status == 200, let part = try? JSONSerialization.jsonObject(with: body) as? [String: Any] else {
                unavailable.append(source.name)
                continue
            }
            archive[source.name] = part
        }
        archive["unavailable"] = unavailable
        return archive
    }
}

extension AuthStorage {
    /// What auth holds of `user`, for their export: the account, its signed-in devices and the people it blocked.
    func export(_ c: Connection, _ user: UUID) throws -> [String: Any] {
        try Export.document(c, """
            SELECT json_build_object(
                'id', u.id, 'username', u.username, 'email', u.email, 'fullName', u.full_name, 'avatarMediaId', u.avatar_media_id,
                'pictureUrl', u.picture_url, 'phone', u.phone, 'postalAddress', u.postal_address, 'emailVerified', u.email_verified,
                'pendingEmail', u.pending_email, 'createdAt', u.created_at, 'updatedAt', u.updated_at,
                'sessions', (SELECT coalesce(json_agg(json_build_object('device', device, 'createdAt', created_at, 'lastUsedAt', last_used_at,
                                                                        'revokedAt', revoked_at) ORDER BY created_at), '[]'::json)
                             FROM auth.sessions WHERE user_id = u.id),
                'blocked', (SELECT coalesce(json_agg(blocked_id), '[]'::json) FROM auth.blocks WHERE user_id = u.id),
                'googleLinked', EXISTS (SELECT 1 FROM auth.google_accounts WHERE user_id = u.id),
                'appleLinked', EXISTS (SELECT 1 FROM auth.apple_accounts WHERE user_id = u.id)
            )::text AS export
            FROM auth.users u WHERE u.id = \(user)
            """)
    }
}
