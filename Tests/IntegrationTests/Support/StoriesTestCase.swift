import Foundation
import XCTest

/// A test case with its own database, auth, and stories on the shared broker.
class StoriesTestCase: ServiceTestCase {
    override var serviceName: String { "stories" }
    override var serviceSettings: [String: String] { ["NEWSLETTER_SCAN_SECONDS": "1"] }

    /// The stories process under test.
    var stories: ServiceProcess! {
        get { service }
        set { service = newValue }
    }

    override func setUpWithError() throws {
        try super.setUpWithError()
        try waitForServiceConsumers()
    }

    /// Creates a group as `admin` and returns its JSON.
    func group(_ admin: Person, name: String = "Family") throws -> [String: Any] {
        let r = try api.post("/v1/groups", ["name": name], token: admin.token)
        XCTAssertEqual(r.status, 201, String(decoding: r.body, as: UTF8.self))
        return r.json
    }

    func join(_ person: Person, _ group: [String: Any]) throws -> APIResponse {
        try api.post("/v1/groups/join", ["inviteCode": group["inviteCode"] as? String ?? ""], token: person.token)
    }

    /// Makes `gid`'s newsletter daily, closing at 15:00 in a zone where it is 13:something now: its reminder (12:00)
    /// is just past.
    func closeDailyTwoHoursAhead(_ gid: String, by admin: Person, file: StaticString = #filePath, line: UInt = #line) throws {
        var utc = Calendar(identifier: .gregorian)
        utc.timeZone = TimeZone(identifier: "UTC")!
        let offset = 13 - utc.component(.hour, from: Date())
        let zone = offset == 0 ? "Etc/GMT" : offset > 0 ? "Etc/GMT-\(offset)" : "Etc/GMT+\(-offset)"
        let changed = try api.patch("/v1/groups/\(gid)", ["newsletter": ["frequency": "daily", "hour": 15, "timeZone": zone]], token: admin.token)
        XCTAssertEqual(changed.status, 200, String(decoding: changed.body, as: UTF8.self), file: file, line: line)
    }

    /// When `gid`'s next reminder is planned for, if it is.
    func plannedReminder(_ gid: String) -> Date? {
        try? database.connect().first("SELECT reminder_due_at FROM stories.groups WHERE id = $1::uuid", [gid])?.decode("reminder_due_at")
    }
}

/// Small images of each accepted kind, real ones (the services decode every upload), made once per run.
enum Images {
    /// A 3×2 PNG.
    static let png = (try? CameraPhotos.photo("png", 3, 2)) ?? []
    /// A JPEG of 640×480.
    static let jpeg = (try? CameraPhotos.photo("jpeg", 640, 480)) ?? []
    /// A WebP of 16×9.
    static let webp = (try? CameraPhotos.photo("webp", 16, 9)) ?? []
    /// An HEIC of 8×6.
    static let heic = (try? CameraPhotos.photo("heic", 8, 6)) ?? []

    /// A PNG a browser decodes: 2×2 pixels, red and blue rows.
    static let decodablePNG: [UInt8] = [
        0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00, 0x02,
        0x00, 0x00, 0x00, 0x02, 0x08, 0x02, 0x00, 0x00, 0x00, 0xFD, 0xD4, 0x9A, 0x73, 0x00, 0x00, 0x00, 0x11, 0x49, 0x44, 0x41,
        0x54, 0x78, 0x9C, 0x63, 0xF8, 0xCF, 0xC0, 0x00, 0x44, 0x0C, 0x60, 0xF2, 0x3F, 0x00, 0x1B, 0xF2, 0x03, 0xFD, 0xF3, 0xE7,
        0x4B, 0xB1, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82,
    ]

    /// What a URL of `upload` loads: the stored image the pipeline made of it.
    static func stored(_ upload: [UInt8]) -> [UInt8] { CameraPhotos.stored(upload) }
}
