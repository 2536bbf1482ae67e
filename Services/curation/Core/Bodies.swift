import Foundation
import Models
import Web

// What the routes take: each request body described once (`RequestBody`).

struct WatchedBody: RequestBody {
    static let schema = Schema.object(["seconds": .required(.integer(0...86_400)), "completed": .optional(.boolean)])
    let seconds: Int
    let completed: Bool?
}

struct CommentBody: RequestBody {
    static let schema = Schema.object(["text": .required(.text(max: 2000, multiline: true))])
    let text: String
}

struct CreatePlaylistBody: RequestBody {
    static let schema = Schema.object([
        "name": .required(.text(max: 100)), "description": .optional(.text(min: 0, max: 1000, multiline: true)),
        "public": .optional(.boolean),
    ])
    let name: String
    let description: String?
    let `public`: Bool?
}

struct UpdatePlaylistBody: RequestBody {
    static let schema = Schema.object([
        "name": .absentOrValue(.text(max: 100)), "description": .optional(.text(min: 0, max: 1000, multiline: true)),
        "public": .absentOrValue(.boolean),
    ])
    let name: String?
    let description: Patch<String>
    let `public`: Bool?

    enum CodingKeys: String, CodingKey { case name, description, `public` }
    init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decodeIfPresent(String.self, forKey: .name)
        description = try c.decode(Patch<String>.self, forKey: .description)
        `public` = try c.decodeIfPresent(Bool.self, forKey: .public)
    }
}

struct PlaylistItemBody: RequestBody {
    /// `position` from 1; the end by default.
    static let schema = Schema.object(["videoId": .required(.uuid), "position": .optional(.integer(1...1000))])
    let videoId: UUID
    let position: Int?
}

struct PlaylistOrderBody: RequestBody {
    static let schema = Schema.object(["videoIds": .required(.array(.uuid, count: 0...1000))])
    let videoIds: [UUID]
}

struct PreferencesBody: RequestBody {
    static let themes = Schema.oneOf(["system", "light", "dark", "sepia"])
    static let schema = Schema.object(["theme": .required(themes), "autoplay": .optional(.boolean)])
    let theme: String
    let autoplay: Bool?
}
