import Foundation
import Models
import Web

// What the routes take: each request body described once (`RequestBody`).

struct CreateGroupBody: RequestBody {
    static let schema = Schema.object(["name": .required(.text(max: 100)), "imageMediaId": .optional(.uuid)])
    let name: String
    let imageMediaId: UUID?
}

struct NewsletterBody: RequestBody {
    /// Only the fields given change; `timeZone` is an IANA name and `startDate` a date that exists (both checked by
    /// the handler, which also asks for `count` and `dayOfMonth` when the frequency needs them).
    static let schema = Schema.object([
        "frequency": .optional(.oneOf(NewsletterSchedule.frequencies)), "weekday": .optional(.integer(1...7)),
        "hour": .optional(.integer(0...23)), "timeZone": .optional(.string(max: 64)),
        "count": .optional(.integer(1...365)), "dayOfMonth": .optional(.integer(1...31)),
        "startDate": .optional(.string(max: 10, pattern: "^[0-9]{4}-[0-9]{2}-[0-9]{2}$", rule: "startDate must be a date, YYYY-MM-DD.")),
    ])
    let frequency: String?
    let weekday: Int?
    let hour: Int?
    let timeZone: String?
    /// Days or weeks per period, with `every_n_days` and `every_n_weeks`.
    let count: Int?
    /// A local date a period closes on, with `every_n_days` and `every_n_weeks` (today in the group's zone if never set).
    let startDate: String?
    /// With `monthly`: the day of the month, the month's last when it is shorter.
    let dayOfMonth: Int?
}

struct UpdateGroupBody: RequestBody {
    static let schema = Schema.object([
        "name": .absentOrValue(.text(max: 100)), "imageMediaId": .optional(.uuid), "newsletter": .absentOrValue(NewsletterBody.schema),
    ])
    let name: String?
    let imageMediaId: Patch<UUID>
    let newsletter: NewsletterBody?

    enum CodingKeys: String, CodingKey { case name, imageMediaId, newsletter }
    init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decodeIfPresent(String.self, forKey: .name)
        imageMediaId = try c.decode(Patch<UUID>.self, forKey: .imageMediaId)
        newsletter = try c.decodeIfPresent(NewsletterBody.self, forKey: .newsletter)
    }
}

struct NewsletterDeliveryBody: RequestBody {
    static let schema = Schema.object(["delivery": .required(.oneOf(Preferences.deliveries))])
    let delivery: String
}

struct JoinBody: RequestBody {
    /// Any string: a code that cannot be one counts as a failed attempt, like a wrong one.
    static let schema = Schema.object(["inviteCode": .required(.string())])
    let inviteCode: String
}

struct CreateJournalBody: RequestBody {
    static let schema = Schema.object(["name": .required(.text(max: 100))])
    let name: String
}

/// A story's colour, `#RRGGBB` (stored upper-cased).
let colorSchema = Schema.string(max: 7, pattern: "^#[0-9A-Fa-f]{6}$", rule: "backgroundColor must be #RRGGBB.")
/// A story's text: may be empty when the story has media.
let storyTextSchema = Schema.text(min: 0, max: 10_000, multiline: true)

struct CreateStoryBody: RequestBody {
    static let schema = Schema.object([
        "text": .required(storyTextSchema), "groupIds": .required(.array(.uuid, count: 1...50)),
        "backgroundColor": .optional(colorSchema), "mediaIds": .optional(.array(.uuid, count: 0...20)), "place": .optional(placeSchema),
        "promptId": .optional(promptIdSchema),
    ])
    let text: String
    let groupIds: [UUID]
    let backgroundColor: String?
    let mediaIds: [UUID]?
    let place: PlaceBody?
    /// The prompt the story answers: the current one of one of its groups (`GET /v1/groups/{id}/prompt`).
    let promptId: String?
}

struct UpdateStoryBody: RequestBody {
    static let schema = Schema.object([
        "text": .absentOrValue(storyTextSchema), "backgroundColor": .optional(colorSchema),
        "mediaIds": .absentOrValue(.array(.uuid, count: 0...20)), "place": .optional(placeSchema),
    ])
    let text: String?
    let backgroundColor: Patch<String>
    let mediaIds: [UUID]?
    /// null takes the place away.
    let place: Patch<PlaceBody>

    enum CodingKeys: String, CodingKey { case text, backgroundColor, mediaIds, place }
    init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        text = try c.decodeIfPresent(String.self, forKey: .text)
        backgroundColor = try c.decode(Patch<String>.self, forKey: .backgroundColor)
        mediaIds = try c.decodeIfPresent([UUID].self, forKey: .mediaIds)
        place = try c.decode(Patch<PlaceBody>.self, forKey: .place)
    }
}

struct CommentBody: RequestBody {
    static let schema = Schema.object(["text": .required(.text(max: 2000, multiline: true))])
    let text: String
}
