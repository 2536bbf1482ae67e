import Crypto
import Foundation
import Identity
import ServiceKit
import Web
import XCTest

/// Every stories endpoint against every kind of caller: outsider, member, administrator, removed member,
/// author and non-author. Outsiders and removed members learn nothing (404); members who may not act get 403.
final class AuthorizationMatrixTests: StoriesHarnessCase {
    func testEveryEndpointForEveryKindOfCaller() throws {
        let admin = try person(), member = try person(), removed = try person(), outsider = try person()
        let family = try group(admin)
        let gid = family.id
        for p in [member, removed] { XCTAssertEqual(try join(p, family).status, 200) }
        let photo = try service.send("POST", "/v1/media", raw: Images.png, as: admin).decode(Identified.self).id
        let story = try service.post("/v1/stories", ["text": "by the admin", "groupIds": [gid], "mediaIds": [photo]], as: admin, Identified.self).view.id
        XCTAssertEqual(try service.send("DELETE", "/v1/groups/\(gid)/members/\(removed.id)", as: admin).status, 204)

        enum Caller: String, CaseIterable { case admin, member, removed, outsider, anonymous }
        let people: [Caller: Person?] = [.admin: admin, .member: member, .removed: removed, .outsider: outsider, .anonymous: nil]
        // (method, path, body, expected status for admin (the author here), member, removed, outsider)
        let table: [(String, String, [String: Any]?, [Caller: Int])] = [
            ("GET", "/v1/groups/\(gid)", nil, [.admin: 200, .member: 200, .removed: 404, .outsider: 404]),
            ("PATCH", "/v1/groups/\(gid)", ["name": "Renamed"], [.admin: 200, .member: 403, .removed: 404, .outsider: 404]),
            ("GET", "/v1/groups/\(gid)/stories", nil, [.admin: 200, .member: 200, .removed: 404, .outsider: 404]),
            ("GET", "/v1/groups/\(gid)/newsletter", nil, [.admin: 200, .member: 200, .removed: 404, .outsider: 404]),
            ("GET", "/v1/groups/\(gid)/newsletters", nil, [.admin: 200, .member: 200, .removed: 404, .outsider: 404]),
            ("GET", "/v1/media/\(photo)", nil, [.admin: 200, .member: 200, .removed: 404, .outsider: 404]),
            ("GET", "/v1/stories/\(story)", nil, [.admin: 200, .member: 200, .removed: 404, .outsider: 404]),
            ("GET", "/v1/stories/\(story)/comments", nil, [.admin: 200, .member: 200, .removed: 404, .outsider: 404]),
            ("POST", "/v1/stories/\(story)/comments", ["text": "hi"], [.admin: 201, .member: 201, .removed: 404, .outsider: 404]),
            ("PATCH", "/v1/stories/\(story)", ["text": "edited"], [.admin: 200, .member: 403, .removed: 404, .outsider: 404]),
            ("POST", "/v1/stories", ["text": "x", "groupIds": [gid]], [.admin: 201, .member: 201, .removed: 404, .outsider: 404]),
            ("POST", "/v1/groups/\(gid)/invite-code", [:], [.admin: 200, .member: 403, .removed: 404, .outsider: 404]),
            ("DELETE", "/v1/groups/\(gid)/members/\(admin.id)", nil, [.member: 403, .removed: 404, .outsider: 404]),
        ]
        for (method, path, body, expected) in table {
            for caller in Caller.allCases {
                let status = caller == .anonymous ? 401 : expected[caller]
                guard let status else { continue }
                let r = try service.send(method, path, json: body ?? (method == "GET" ? nil : [String: Any]()), as: people[caller]!)
                XCTAssertEqual(r.status, status, "\(caller.rawValue) \(method) \(path): \(String(decoding: r.body.prefix(200), as: UTF8.self))")
                if status == 404 { XCTAssertEqual(r.errorCode, "not_found", "\(caller.rawValue) \(method) \(path)") }
            }
        }
        // Destructive ones last: a non-author cannot delete, the author can.
        assertClientError(try service.send("DELETE", "/v1/stories/\(story)", as: member), 403)
        assertClientError(try service.send("DELETE", "/v1/stories/\(story)", as: outsider), 404)
        XCTAssertEqual(try service.send("DELETE", "/v1/stories/\(story)", as: admin).status, 204)
        // A removed member rejoins only with the current code, and then sees the group again.
        assertClientError(try join(removed, family), 404, "the code was rotated above")
        XCTAssertEqual(try service.send("GET", "/v1/users/me/calendar", as: outsider).status, 200, "everyone has a calendar of their own")
    }

    /// The in-process service takes the harness's tokens because its verifier was given the harness's key, not
    /// because tokens go unchecked: one signed with another key, or expired, is a 401 as anywhere.
    func testATokenOfAnotherKeyOrExpiredIs401() throws {
        let ann = try person()
        let now = Int(Date().timeIntervalSince1970)
        let forged = try JWT.sign(AccessClaims(sub: ann.id, sid: UUID().lowercased, iat: now, exp: now + 60), key: try Ed25519PrivateKey(),
                                  kid: Harness.keyID)
        let expired = try JWT.sign(AccessClaims(sub: ann.id, sid: UUID().lowercased, iat: now - 900, exp: now - 60), key: Harness.key,
                                   kid: Harness.keyID)
        for token in [forged, expired] {
            assertClientError(try service.send("GET", "/v1/groups", headers: ["Authorization": "Bearer \(token)"]), 401, code: "unauthenticated")
        }
        XCTAssertEqual(try service.send("GET", "/v1/groups", as: ann).status, 200)
    }

    /// What the test reads of a created resource.
    struct Identified: Decodable { let id: String }
}

/// The journey from the issue, end to end: sign up, group, join by code, stories with photos, the week's newsletter.
final class TapestryJourneyTests: StoriesTestCase {
    func testTwoPeopleShareAWeekAndReadItsNewsletter() throws {
        let ann = try person("ann_journey"), ben = try person("ben_journey")
        let family = try group(ann, name: "Journey family")
        XCTAssertEqual(try api.post("/v1/groups/join", ["inviteCode": family["inviteCode"]!], token: ben.token).status, 200)
        var photos: [String] = []
        for (who, image) in [(ann, Images.jpeg), (ben, Images.png)] {
            let photo = try api.send("POST", "/v1/media", raw: image, token: who.token)
            XCTAssertEqual(photo.status, 201)
            photos.append(photo["id"] as! String)
            // Ann says where she was, at city precision; the photo's own location is never used.
            let place: Any = who.id == ann.id ? ["name": "Lisbon", "latitude": 38.722_252, "longitude": -9.139_337, "precision": "city"] : NSNull()
            let story = try api.post("/v1/stories", ["text": "My day", "groupIds": [family["id"]!], "mediaIds": [photo["id"]!],
                                                     "backgroundColor": "#FFEEDD", "place": place], token: who.token)
            XCTAssertEqual(story.status, 201)
        }
        let week = try api.get("/v1/groups/\(family["id"]!)/newsletter", token: ben.token)
        XCTAssertEqual(week.status, 200)
        XCTAssertEqual(week["storyCount"] as? Int, 2)
        let urls = (week["members"] as? [[String: Any]] ?? []).flatMap { ($0["days"] as? [[String: Any]] ?? []) }
            .flatMap { $0["stories"] as? [[String: Any]] ?? [] }.flatMap { $0["media"] as? [[String: Any]] ?? [] }.compactMap { $0["url"] as? String }
        XCTAssertEqual(Set(urls.map { URLComponents(string: $0)?.path }), Set(photos.map { "/v1/media/\($0)" }))
        for url in urls { XCTAssertEqual(try load(url).status, 200, "both photos load by the URLs the newsletter gave") }
        let places = (week["members"] as? [[String: Any]] ?? []).flatMap { ($0["days"] as? [[String: Any]] ?? []) }
            .flatMap { $0["stories"] as? [[String: Any]] ?? [] }.compactMap { $0["place"] as? [String: Any] }
        XCTAssertEqual(places.map { $0["name"] as? String }, ["Lisbon"], "Ann's place; none on Ben's")
        XCTAssertEqual(places.map { [$0["latitude"] as? Double, $0["longitude"] as? Double] }, [[38.7, -9.1]], "as coarse as she chose")
        let html = try api.get("/v1/groups/\(family["id"]!)/newsletter?format=html", token: ann.token)
        XCTAssertEqual(html.status, 200)
        XCTAssertTrue(String(decoding: html.body, as: UTF8.self).contains("📍 Lisbon"))
        // The e-mail loads the large rendition (the signature covers the size).
        for photo in photos { XCTAssertTrue(String(decoding: html.body, as: UTF8.self).contains("/v1/media/\(photo)?size=large&amp;exp="), photo) }

        // The app's story list draws each photo from its smallest rendition: a browser loads them by their URLs.
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium") else {
            throw TestFailure("Chromium is missing: deploy/local/stack install puts Debian's chromium package in")
        }
        let list = try api.get("/v1/groups/\(family["id"]!)/stories", token: ben.token)
        let small = (list["items"] as? [[String: Any]] ?? []).flatMap { $0["media"] as? [[String: Any]] ?? [] }
            .compactMap { ($0["urls"] as? [String: String])?["small"] }
        XCTAssertEqual(small.count, 2)
        let page = FileManager.default.temporaryDirectory.appendingPathComponent("stories-\(UUID().uuidString.prefix(8)).html")
        try ("<html><body>" + small.map { "<img src=\"\($0.replacingOccurrences(of: "&", with: "&amp;"))\">" }.joined() + """
            <script>window.addEventListener('load', () => document.body.setAttribute('data-images',
              Array.from(document.images).map(i => i.complete ? i.naturalWidth + 'x' + i.naturalHeight : 'broken').sort().join(',')))</script>
            </body></html>
            """).write(to: page, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: page) }
        let dom = try IntegrationTests.run(["/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                            "--virtual-time-budget=10000", "--dump-dom", page.absoluteString])
        // Ann's 640 × 480 JPEG as 320 × 240; Ben's 3 × 2 PNG, smaller than any rendition, as it is.
        XCTAssertTrue(dom.contains(#"data-images="320x240,3x2""#), "both small renditions show: \(dom.suffix(400))")
    }
}
