import Foundation
import XCTest

/// Media, and who may see them, through stories processes (`StoryRulesTests` has the rules of stories and comments).
/// `StoriesContentInABucketTests` runs the image tests again with the images in an S3 bucket.
class StoriesContentTests: StoriesTestCase {
    func upload(_ bytes: [UInt8], _ who: Person, contentType: String = "image/png") throws -> APIResponse {
        try api.send("POST", "/v1/media", raw: bytes, token: who.token, headers: ["Content-Type": contentType])
    }

    func testMediaTypesComeFromTheBytesAndOnlyMembersSeeThem() throws {
        let ann = try person(), ben = try person(), eve = try person()
        // The document says which types the image route answers with, and that it answers 304 to a cached copy.
        let served = (((try api.get("/openapi.json").json["paths"] as? [String: Any])?["/v1/media/{id}"] as? [String: Any])?["get"]
                      as? [String: Any])?["responses"] as? [String: [String: Any]] ?? [:]
        let documented = Set((served["200"]?["content"] as? [String: Any] ?? [:]).keys)
        XCTAssertNotNil(served["304"])
        XCTAssertEqual(Set((served["200"]?["headers"] as? [String: Any] ?? [:]).keys), ["ETag", "Cache-Control", "Content-Security-Policy"])
        XCTAssertEqual(Set((served["304"]?["headers"] as? [String: Any] ?? [:]).keys), ["ETag", "Cache-Control"])
        // Whatever the upload's format, what is stored is the pipeline's JPEG, of the upload's size.
        for (bytes, type, width, height) in [(Images.png, "image/png", 3, 2), (Images.jpeg, "image/jpeg", 640, 480),
                                             (Images.webp, "image/webp", 16, 9), (Images.heic, "image/heic", 8, 6)] {
            let r = try upload(bytes, ann, contentType: "application/octet-stream")
            XCTAssertEqual(r.status, 201, type)
            XCTAssertEqual(r["contentType"] as? String, "image/jpeg", type)
            XCTAssertEqual(r["width"] as? Int, width, type)
            XCTAssertEqual(r["height"] as? Int, height, type)
        }
        XCTAssertTrue(documented.contains("image/jpeg"))
        // Uploads that lie about their type.
        assertClientError(try upload(Array("<svg onload=alert(1)>".utf8), ann, contentType: "image/png"), 415, code: "unsupported_media_type")
        assertClientError(try upload(Array("GIF89a......".utf8), ann, contentType: "image/jpeg"), 415)
        assertClientError(try upload(Array(Images.png.prefix(10)), ann), 415, "a truncated PNG")
        let html = Array("<html><script>alert(document.cookie)</script></html>".utf8)
        assertClientError(try upload(Array(Images.jpeg.prefix(20)) + html, ann, contentType: "image/jpeg"), 415,
                          "a JPEG header followed by HTML")
        // HTML after the end of an image is not stored: only the image, decoded and encoded again, is.
        let trailing = try upload(Images.jpeg + html, ann, contentType: "image/jpeg")
        XCTAssertEqual(trailing.status, 201)
        XCTAssertFalse(String(decoding: try api.get("/v1/media/\(trailing["id"]!)", token: ann.token).body, as: UTF8.self).contains("<script"))
        assertClientError(try upload([], ann), 400)
        assertClientError(try upload([UInt8](repeating: 0xFF, count: (10 << 20) + 1), ann), 413, code: "payload_too_large")
        api.http.disconnect()

        let photo = try upload(Images.png, ann)
        let id = photo["id"] as! String
        let own = try api.get("/v1/media/\(id)", token: ann.token)
        XCTAssertEqual(own.status, 200)
        XCTAssertEqual(own.body, Images.stored(Images.png))
        XCTAssertEqual(own.headers["content-type"], "image/jpeg")
        XCTAssertEqual(own.headers["content-security-policy"], "default-src 'none'; sandbox")
        XCTAssertEqual(own.headers["x-content-type-options"], "nosniff")
        let etag = own.headers["etag"] ?? ""
        XCTAssertFalse(etag.isEmpty)
        XCTAssertTrue(own.headers["cache-control"]?.contains("private") == true)
        // RFC 9110 13.1.2: the tag in a list, its weak form, or `*`.
        for held in [etag, "\"old\", \(etag)", "W/\(etag)", "*"] {
            XCTAssertEqual(try api.send("GET", "/v1/media/\(id)", token: ann.token, headers: ["If-None-Match": held]).status, 304, held)
        }
        XCTAssertEqual(try api.send("GET", "/v1/media/\(id)", token: ann.token, headers: ["If-None-Match": "\"old\""]).status, 200)
        assertClientError(try api.get("/v1/media/\(id)", token: ben.token), 404, "not shared yet")

        let family = try group(ann)
        XCTAssertEqual(try join(ben, family).status, 200)
        XCTAssertEqual(try api.post("/v1/stories", ["text": "Look", "groupIds": [family["id"]!], "mediaIds": [id]], token: ann.token).status, 201)
        XCTAssertEqual(try api.get("/v1/media/\(id)", token: ben.token).body, Images.stored(Images.png), "shared to Ben's group")
        assertClientError(try api.get("/v1/media/\(id)", token: eve.token), 404, code: "not_found", "outsiders learn nothing")
        assertClientError(try api.get("/v1/media/\(UUID().uuidString.lowercased())", token: ann.token), 404)
    }

    /// Every view that shows an image gives a URL that loads it without a token, as an <img> in an app, a browser or a
    /// mail client would: short-lived in the apps, for weeks in the e-mail-ready newsletter. A changed URL is a 403.
    func testImagesLoadByTheSignedURLsTheViewsGive() throws {
        let ann = try person(), ben = try person()
        let photo = try upload(Images.png, ann)
        let id = photo["id"] as! String
        XCTAssertEqual(try load(photo["url"]).body, Images.stored(Images.png), "the uploader's own view")
        let family = try group(ann)
        let gid = family["id"] as! String
        XCTAssertEqual(try join(ben, family).status, 200)
        XCTAssertEqual(try api.patch("/v1/groups/\(gid)", ["imageMediaId": id], token: ann.token).status, 200)
        XCTAssertEqual(try load(try api.get("/v1/groups/\(gid)", token: ben.token)["imageUrl"]).body, Images.stored(Images.png), "the group's image")
        let story = try api.post("/v1/stories", ["text": "Look", "groupIds": [gid], "mediaIds": [id]], token: ann.token)
        let seen = try api.get("/v1/stories/\(story["id"]!)", token: ben.token)
        let url = (seen["media"] as? [[String: Any]])?.first?["url"]
        let loaded = try load(url)
        XCTAssertEqual(loaded.body, Images.stored(Images.png), "Ben's view of the story")
        XCTAssertEqual(try load(url, headers: ["If-None-Match": loaded.headers["etag"] ?? ""]).status, 304)
        assertClientError(try load(tampered(url)), 403, code: "forbidden", "a changed signature")
        let later = (url as? String ?? "").replacingOccurrences(of: #"exp=(\d+)"#, with: "exp=9$1", options: .regularExpression)
        assertClientError(try load(later), 403, code: "forbidden", "a later expiry")
        let expiry = { (u: Any?) -> TimeInterval in
            let text = u as? String ?? ""
            let exp = text.range(of: #"exp=\d+"#, options: .regularExpression).map { Double(text[$0].dropFirst(4)) ?? 0 } ?? 0
            return exp - Date().timeIntervalSince1970
        }
        XCTAssertLessThan(expiry(url), 8 * 3600, "an app's link lives hours")

        let html = String(decoding: try api.get("/v1/groups/\(gid)/newsletter?format=html", token: ben.token).body, as: UTF8.self)
        let src = html.range(of: #"<img src="[^"]+""#, options: .regularExpression).map {
            String(html[$0].dropFirst(10).dropLast()).replacingOccurrences(of: "&amp;", with: "&")
        }
        XCTAssertEqual(try load(src).body, Images.stored(Images.png), "the e-mail-ready newsletter's photo")
        XCTAssertGreaterThan(expiry(src), 29 * 86400, "an e-mail's link lives weeks")
        let json = try api.get("/v1/groups/\(gid)/newsletter", token: ben.token)
        let day = ((json["members"] as? [[String: Any]])?.first?["days"] as? [[String: Any]])?.first
        XCTAssertEqual(try load(((day?["stories"] as? [[String: Any]])?.first?["media"] as? [[String: Any]])?.first?["url"]).body, Images.stored(Images.png))
    }

    /// The e-mail-ready newsletter as a mail client shows it: the page from a file, its photos fetched by their URLs,
    /// without a token. Headless Chromium renders it; a probe added to the copy reports each image decoded or broken.
    func testTheEmailReadyNewsletterShowsItsPhotosInABrowser() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium") else {
            throw TestFailure("Chromium is missing: deploy/local/stack install puts Debian's chromium package in")
        }
        let ann = try person()
        let family = try group(ann)
        for _ in 0..<2 {
            let photo = try upload(Images.decodablePNG, ann)
            XCTAssertEqual(try api.post("/v1/stories", ["text": "Look", "groupIds": [family["id"]!], "mediaIds": [photo["id"]!]],
                                        token: ann.token).status, 201)
        }
        let html = String(decoding: try api.get("/v1/groups/\(family["id"]!)/newsletter?format=html", token: ann.token).body, as: UTF8.self)
        let probe = """
            <script>window.addEventListener('load', () => document.body.setAttribute('data-images',
              Array.from(document.images).map(i => i.complete && i.naturalWidth > 0 ? 'shown' : 'broken').join(',')))</script>
            """
        let page = FileManager.default.temporaryDirectory.appendingPathComponent("newsletter-\(UUID().uuidString.prefix(8)).html")
        try (html.replacingOccurrences(of: "</body>", with: probe + "</body>")).write(to: page, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: page) }
        let dom = try IntegrationTests.run(["/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                            "--virtual-time-budget=10000", "--dump-dom", page.absoluteString])
        XCTAssertTrue(dom.contains(#"data-images="shown,shown""#), "both photos show: \(dom.suffix(400))")
    }

    func testARemovedMemberLosesAccessToTheGroupsStoriesAndMedia() throws {
        let ann = try person(), ben = try person()
        let family = try group(ann)
        let gid = family["id"] as! String
        XCTAssertEqual(try join(ben, family).status, 200)
        let photo = try upload(Images.jpeg, ann)["id"] as! String
        let story = try api.post("/v1/stories", ["text": "Hi", "groupIds": [gid], "mediaIds": [photo]], token: ann.token)["id"] as! String
        let bensOwn = try api.post("/v1/stories", ["text": "Mine", "groupIds": [gid]], token: ben.token)["id"] as! String
        XCTAssertEqual(try api.get("/v1/stories/\(story)", token: ben.token).status, 200)
        XCTAssertEqual(try api.send("DELETE", "/v1/groups/\(gid)/members/\(ben.id)", token: ann.token).status, 204)
        for path in ["/v1/groups/\(gid)", "/v1/groups/\(gid)/stories", "/v1/stories/\(story)", "/v1/stories/\(story)/comments",
                     "/v1/media/\(photo)"] {
            assertClientError(try api.get(path, token: ben.token), 404, code: "not_found", path)
        }
        assertClientError(try api.post("/v1/stories", ["text": "still here?", "groupIds": [gid]], token: ben.token), 404)
        XCTAssertEqual(try api.get("/v1/stories/\(bensOwn)", token: ben.token).status, 200, "an author keeps their own story")
        XCTAssertEqual(try api.get("/v1/stories/\(bensOwn)", token: ann.token).status, 200)
    }

    func testEveryEndpointRefusesBadInputWithAClearClientError() throws {
        let ann = try person()
        let family = try group(ann)
        let gid = family["id"] as! String
        let story = try api.post("/v1/stories", ["text": "hello", "groupIds": [gid]], token: ann.token)["id"] as! String
        let groupsBefore = try count("groups", "kind = 'group'"), storiesBefore = try count("stories"), commentsBefore = try count("comments")
        let endpoints: [(String, String)] = [("POST", "/v1/groups"), ("PATCH", "/v1/groups/\(gid)"), ("POST", "/v1/groups/join"),
                                             ("POST", "/v1/journals"), ("POST", "/v1/stories"), ("PATCH", "/v1/stories/\(story)"),
                                             ("POST", "/v1/stories/\(story)/comments")]
        let bodies: [[UInt8]] = [[], Array("{".utf8), Array("[1]".utf8), Array(#"{"name": 5, "text": 5, "inviteCode": 5, "groupIds": "x"}"#.utf8),
                                 Array(#"{"unknownField": true}"#.utf8), [0x7B, 0x22, 0xC3, 0x28, 0x22, 0x3A, 0x31, 0x7D],
                                 Array(#"{"name": "a\u0000b", "text": "a\u0000b", "inviteCode": "a\u0000b"}"#.utf8)]
        for (method, path) in endpoints {
            for body in bodies {
                let r = try api.send(method, path, raw: body, token: ann.token, headers: ["Content-Type": "application/json"])
                assertClientError(r, 400, "\(method) \(path) \(String(decoding: body, as: UTF8.self))")
            }
            let big = [UInt8](repeating: 0x20, count: 2 << 20)
            assertClientError(try api.send(method, path, raw: big, token: ann.token, headers: ["Content-Type": "application/json"]), 413)
            api.http.disconnect()
            assertClientError(try api.send(method, path, json: [:], token: nil), 401, code: "unauthenticated")
        }
        for path in ["/v1/groups/not-a-uuid", "/v1/stories/'; DROP TABLE stories.stories; --", "/v1/media/%00",
                     "/v1/groups/\(UUID().uuidString.lowercased())/stories"] {
            assertClientError(try api.get(path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? path, token: ann.token), 404, path)
        }
        let sql = "Robert'); DROP TABLE stories.groups;--"
        XCTAssertEqual(try api.post("/v1/groups", ["name": sql], token: ann.token)["name"] as? String, sql)
        XCTAssertEqual(try count("groups", "kind = 'group'"), groupsBefore + 1)
        XCTAssertEqual(try count("stories"), storiesBefore)
        XCTAssertEqual(try count("comments"), commentsBefore)
    }

    func testTheOpenAPIDocumentListsEveryRoute() throws {
        let doc = try api.get("/openapi.json").json
        let paths = doc["paths"] as? [String: [String: Any]] ?? [:]
        let documented = Set(paths.flatMap { path, ops in ops.keys.map { "\($0.uppercased()) \(path)" } })
        for op in ["POST /v1/groups", "GET /v1/groups", "GET /v1/groups/{id}", "PATCH /v1/groups/{id}", "POST /v1/groups/join",
                   "POST /v1/groups/{id}/invite-code", "DELETE /v1/groups/{id}/members/{userId}", "GET /v1/groups/{id}/stories",
                   "POST /v1/journals", "POST /v1/media", "GET /v1/media/{id}", "GET /v1/media/avatars/{userId}/{id}", "POST /v1/stories", "GET /v1/stories/{id}",
                   "PATCH /v1/stories/{id}", "DELETE /v1/stories/{id}", "POST /v1/stories/{id}/comments",
                   "GET /v1/stories/{id}/comments", "GET /v1/groups/{id}/newsletter", "GET /v1/groups/{id}/newsletters",
                   "GET /v1/groups/{id}/newsletters/{newsletterId}", "GET /v1/users/me/calendar", "GET /v1/users/me/stories",
                   "PUT /v1/groups/{id}/newsletter-delivery", "GET /v1/users/me/hidden-authors", "PUT /v1/users/me/hidden-authors/{userId}",
                   "DELETE /v1/users/me/hidden-authors/{userId}", "POST /v1/stories/{id}/reports", "GET /healthz", "GET /readyz", "GET /metrics", "GET /openapi.json",
                   "POST /v1/habits", "GET /v1/habits", "GET /v1/habits/{id}", "PATCH /v1/habits/{id}", "DELETE /v1/habits/{id}",
                   "PUT /v1/habits/{id}/days/{date}", "DELETE /v1/habits/{id}/days/{date}", "GET /v1/habits/{id}/calendar",
                   "PUT /v1/habits/{id}/shares/{groupId}", "DELETE /v1/habits/{id}/shares/{groupId}", "GET /v1/groups/{id}/prompt"] {
            XCTAssertTrue(documented.contains(op), op)
        }
        XCTAssertEqual(documented.count, 43)
        let ann = try person()
        let created = try group(ann)
        let schema = ((((paths["/v1/groups"]?["post"] as? [String: Any])?["responses"] as? [String: Any])?["201"] as? [String: Any])?["content"]
                      as? [String: Any]).flatMap { ($0["application/json"] as? [String: Any])?["schema"] as? [String: Any] } ?? [:]
        XCTAssertEqual(SchemaValidator(schema: schema).validate(created), [])
    }
}

/// Stories and comments, and who may see and change them, against stories in-process.
final class StoryRulesTests: StoriesHarnessCase {
    func testStoriesGoToChosenGroupsAndOnlyTheirMembersSeeThem() throws {
        let ann = try person(), ben = try person(), cat = try person()
        let family = try group(ann, name: "Family"), friends = try group(ann, name: "Friends")
        XCTAssertEqual(try join(ben, family).status, 200)
        XCTAssertEqual(try join(cat, friends).status, 200)

        let created = try service.post("/v1/stories", ["text": "A long day\nbut good", "groupIds": [family.id, friends.id],
                                                       "backgroundColor": "#a1b2c3"], as: ann, StoriesViews.Story.self)
        XCTAssertEqual(created.status, 201)
        XCTAssertEqual(created.view.backgroundColor, "#A1B2C3")
        let id = created.view.id
        XCTAssertEqual(Set(created.view.groupIds), [family.id, friends.id])
        // Ben sees it, but only his group: he must not learn that Ann also has a group called Friends.
        let seenByBen = try service.get("/v1/stories/\(id)", as: ben, StoriesViews.Story.self)
        XCTAssertEqual(seenByBen.status, 200)
        XCTAssertEqual(seenByBen.view.groupIds, [family.id])
        XCTAssertEqual(try service.get("/v1/stories/\(id)", as: cat, StoriesViews.Story.self).view.groupIds, [friends.id])
        let outsider = try person()
        assertClientError(try service.send("GET", "/v1/stories/\(id)", as: outsider), 404, code: "not_found")
        assertClientError(try service.send("GET", "/v1/groups/\(family.id)/stories", as: outsider), 404)

        // Only the author changes or deletes it.
        assertClientError(try service.send("PATCH", "/v1/stories/\(id)", json: ["text": "hijacked"], as: ben), 403, code: "forbidden")
        assertClientError(try service.send("DELETE", "/v1/stories/\(id)", as: ben), 403)
        assertClientError(try service.send("PATCH", "/v1/stories/\(id)", json: ["text": "x"], as: outsider), 404)
        let edited = try service.patch("/v1/stories/\(id)", ["text": "An edited day", "backgroundColor": NSNull()], as: ann, StoriesViews.Story.self)
        XCTAssertEqual(edited.status, 200)
        XCTAssertEqual(edited.view.text, "An edited day")
        XCTAssertNil(edited.view.backgroundColor)

        // Comments by members, counted on the story.
        XCTAssertEqual(try service.send("POST", "/v1/stories/\(id)/comments", json: ["text": "Lovely!"], as: ben).status, 201)
        assertClientError(try service.send("POST", "/v1/stories/\(id)/comments", json: ["text": "spam"], as: outsider), 404)
        XCTAssertEqual(try service.get("/v1/stories/\(id)", as: ann, StoriesViews.Story.self).view.commentCount, 1)
        let comments = try service.get("/v1/stories/\(id)/comments", as: cat, Listing<StoriesViews.Comment>.self).view.items
        XCTAssertEqual(comments.map(\.text), ["Lovely!"])

        // The events as they will be published.
        for type in ["story.created", "story.commented"] {
            guard let event = try service.outbox(type).first(where: { $0.subject == id }) else { XCTFail("no \(type)"); continue }
            XCTAssertEqual(try SchemaValidator.event(type).validate(try JSONSerialization.jsonObject(with: Data(event.event.utf8))), [], type)
        }
        XCTAssertFalse(try service.outbox("story.created").contains { $0.event.contains("A long day") }, "story text stays out of events")

        XCTAssertEqual(try service.send("DELETE", "/v1/stories/\(id)", as: ann).status, 204)
        assertClientError(try service.send("GET", "/v1/stories/\(id)", as: ben), 404)
        XCTAssertEqual(try service.count("comments", "story_id = '\(id)'"), 0)
    }

    func testStoryRulesAreEnforced() throws {
        let ann = try person(), ben = try person()
        let family = try group(ann), other = try group(ben)
        let gid = family.id
        let bensPhoto = try upload(Images.png, ben).decode(StoriesViews.Created.self).id
        let cases: [([String: Any], Int, String?)] = [
            (["text": "x", "groupIds": [String]()], 400, "groupIds"),
            (["text": "x", "groupIds": ["not-a-uuid"]], 400, "groupIds[0]"),
            (["text": "x", "groupIds": [gid, gid]], 400, "groupIds[1]"),
            (["text": "x", "groupIds": [other.id]], 404, nil),
            (["text": "x", "groupIds": [UUID().uuidString.lowercased()]], 404, nil),
            (["text": String(repeating: "é", count: 10_001), "groupIds": [gid]], 400, "text"),
            (["text": "x", "groupIds": [gid], "backgroundColor": "red"], 400, "backgroundColor"),
            (["text": "x", "groupIds": [gid], "backgroundColor": "#12345G"], 400, "backgroundColor"),
            (["text": "x", "groupIds": [gid], "mediaIds": [bensPhoto]], 400, "mediaIds"),
            (["text": "   ", "groupIds": [gid]], 400, "text"),
        ]
        for (body, status, field) in cases {
            let r = try service.send("POST", "/v1/stories", json: body, as: ann)
            assertClientError(r, status, String(describing: body).prefix(80).description)
            if let field { XCTAssertEqual(r.errorField, field) }
        }
        XCTAssertEqual(try service.count("stories"), 0, "nothing half-written")
        XCTAssertEqual(try service.send("POST", "/v1/stories", json: ["text": String(repeating: "é", count: 10_000), "groupIds": [gid]], as: ann).status,
                       201)
    }

    func testGroupStoriesPageNewestFirstWithinFromTo() throws {
        let ann = try person()
        let gid = try group(ann).id
        var ids: [String] = []
        var times: [String] = []
        for i in 0..<7 {
            let story = try service.post("/v1/stories", ["text": "day \(i)", "groupIds": [gid]], as: ann, StoriesViews.Story.self).view
            ids.append(story.id)
            times.append(story.createdAt)
        }
        var seen: [String] = []
        var cursor: String?
        repeat {
            let page = try service.get("/v1/groups/\(gid)/stories?limit=3" + (cursor.map { "&cursor=\($0)" } ?? ""), as: ann,
                                       Listing<StoriesViews.Story>.self)
            XCTAssertEqual(page.status, 200)
            seen += page.view.items.map(\.id)
            cursor = page.view.nextCursor
            // A story posted while paging does not shift the pages already read.
            if seen.count == 3 { _ = try service.send("POST", "/v1/stories", json: ["text": "late", "groupIds": [gid]], as: ann) }
        } while cursor != nil
        XCTAssertEqual(seen, ids.reversed())
        let window = try service.get("/v1/groups/\(gid)/stories?from=\(times[2])&to=\(times[5])", as: ann, Listing<StoriesViews.Story>.self)
        XCTAssertEqual(window.view.items.map(\.id), [ids[4], ids[3], ids[2]])
        assertClientError(try service.send("GET", "/v1/groups/\(gid)/stories?from=yesterday", as: ann), 400, code: "validation_failed")
        assertClientError(try service.send("GET", "/v1/groups/\(gid)/stories?from=\(times[5])&to=\(times[2])", as: ann), 400)
    }
}

extension Array where Element == UInt8 {
    func contains(subsequence: [UInt8]) -> Bool {
        guard subsequence.count <= count else { return false }
        return (0...(count - subsequence.count)).contains { Array(self[$0..<($0 + subsequence.count)]) == subsequence }
    }
}

extension EventProbe {
    /// The first event of `type` about `subject`.
    func first(where type: String, subject: String) -> [String: Any]? {
        first { $0["type"] as? String == type && $0["subject"] as? String == subject }
    }
}

extension Dictionary where Key == String, Value == Any {
    /// The envelope without the probe's own fields.
    var envelope: [String: Any] { filter { !$0.key.hasPrefix("_") } }
}
