import Foundation
import HTTP
import Runtime
import Web

/// Whether an image may be someone's avatar: only one they uploaded to stories as an avatar
/// (`POST /v1/media?purpose=avatar`), which auth asks stories about (`STORIES_URL`, with `SERVICE_TOKEN`) before it
/// accepts an `avatarMediaId`. Any other id, another person's photo or a made-up one, would be signed into every view
/// of the user for all to load.
struct Avatars: Sendable {
    /// `STORIES_URL`: where stories answers services; nil (or no `SERVICE_TOKEN`), no avatar can be checked and
    /// none is accepted.
    let stories: URL?
    let token: String?

    init(_ environment: Environment, token: String?) throws {
        if let text = environment.optional("STORIES_URL") {
            guard let url = URL(string: text), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
                throw ConfigError(variable: "STORIES_URL", problem: "must be an http(s) URL such as http://stories:8082")
            }
            stories = url
        } else {
            stories = nil
        }
        self.token = token
    }

    /// Whether avatars can be checked at all (for a warning at start).
    var isEnabled: Bool { stories != nil && token != nil }

    /// Throws 400 naming `avatarMediaId` unless `user` uploaded image `id` to stories as their avatar (or when
    /// avatars cannot be checked here at all); 503 when stories does not say.
    func require(_ id: UUID, of user: UUID) throws {
        guard let stories, let token else {
            throw HTTPError.validation("avatarMediaId cannot be set on this server.", field: "avatarMediaId")
        }
        let url = stories.appendingPathComponent("v1/internal/users/\(user.lowercased)/avatars/\(id.lowercased)")
        switch Fetch.get(url, headers: ["Authorization": "Bearer \(token)"], timeout: 5)?.status {
        case 204: return
        case 404: throw HTTPError.validation("avatarMediaId must name an image you uploaded as your avatar (POST /v1/media?purpose=avatar).",
                                            field: "avatarMediaId")
        default: throw HTTPError.unavailable()
        }
    }
}
