import Foundation
import HTTP
import XCTest

/// A test case with its own database, auth, and curation on the shared broker; the catalogue is imported by the
/// `curation import` command, as an operator would.
class CurationTestCase: ServiceTestCase {
    override var serviceName: String { "curation" }
    override var serviceSettings: [String: String] { ["CATALOGUE_REFRESH_SECONDS": "1"] }
    static let shipped = TestEnvironment.root.appendingPathComponent("deploy/demo/curation/videos.jsonl").path

    /// Its consumer group holds its partitions before the test runs, so no test stops it mid-join (which can
    /// hang later joins in Tansu).
    override func setUpWithError() throws {
        try super.setUpWithError()
        try waitForServiceConsumers()
    }

    /// Runs `curation import FILE`; its exit status and log.
    func importCatalogue(_ path: String) throws -> (status: Int32, log: String) {
        let command = try ServiceProcess("curation", environment: ["DATABASE_URL": database.url], arguments: ["import", path])
        command.process.waitUntilExit()
        return (command.process.terminationStatus, command.log)
    }

    /// A catalogue file of the first `count` lines of the shipped one, plus `extra` lines.
    func catalogueFile(first count: Int, extra: [String] = []) throws -> String {
        let lines = try String(contentsOfFile: Self.shipped, encoding: .utf8).split(separator: "\n").prefix(count).map(String.init)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("catalogue-\(UUID().uuidString).jsonl").path
        try (lines + extra).joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// The video id of a YouTube id.
    func video(_ youtubeId: String) throws -> String {
        try database.connect().first("SELECT id::text AS id FROM curation.videos WHERE youtube_id = $1", [youtubeId])!["id"]
    }

    /// Waits until the running service's index holds the whole catalogue: the recommendations of a video of the
    /// import's last transaction answer (an index built while the import ran holds only its earlier transactions).
    func waitForIndex() throws {
        let newest: String = try database.connect().first("SELECT id::text AS id FROM curation.videos ORDER BY created_at DESC LIMIT 1")!["id"]
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 30) { (try? self.api.get("/v1/videos/\(newest)/recommendations"))?.status == 200 })
    }
}

final class CurationCatalogueTests: CurationTestCase {
    /// Hand-labelled: a video, and videos of its topic a student should be offered next to it.
    static let relevance: [(String, [String])] = [
        ("3ER8OkqBdpE", ["6E_NVnboMB8", "wBDOCvHYckE"]),  // Probability (part 1)
        ("BDWqwcTtZa0", ["0t4MF9ZoppM", "BZmtnCqTWik"]),  // French Revolution (part 1)
        ("WScwPIPqZa0", ["erjMiErRgSQ", "GwoX_BemwHs"]),  // Ideal gas equation: PV = nRT
        ("2f7YwCtHcgk", ["FE2jfTXAJHg", "juM2ROSLWfw", "W_Q17tqw_7A"]),  // Introduction to cellular respiration
        ("ubq4eu_TDFc", ["tJjXpiWKMyA", "-Yg89GY61DE"]),  // Genetics 101 part 1: What are genes?
        ("8183HPmA2_I", ["T9Nw66RCMhg", "IVHD9wGlbho"]),  // Human prehistory 101 part 1: Out of (eastern) Africa
        ("0zExhHh7_Ic", ["XdsifNBa9kk", "H6ZNLD1AeM8"]),  // Slope of a secant line example 1
        ("XqQTXW7XfYA", ["bCxMhncR7PU", "Xqfcy1rqMbI"]),  // Permutations
        ("_6kwhF6hoqQ", ["-V-Y5klejSg", "RBUBIRtn0xQ"]),  // Consumer surplus introduction
        ("yfR36PMWegg", ["slm6D2VEXYs", "7ynX_F-SwNY"]),  // Photosynthesis:  Light reactions and photophosphorylation
        ("EtZnPoYbRyA", ["6uNYe9UB3K4", "AoRpWU6hHJ8"]),  // Hitler and the Nazis come to power
        ("AAWsuFXojgo", ["slP8XZ6Nq40", "YOT8ryWzwbY"]),  // Elasticity of supply
        ("xGkE0oHyNhk", ["bBQVaRnHqLs", "7t8gdc3YogM"]),  // Marginal revenue and marginal cost
        ("eEUvRrhmcxM", ["D5ymMYcLtv0", "Bc9bhLk_AhI"]),  // Introduction to heredity
        ("fLKOBQ6cZHA", ["LWtXthfG9_M", "QhiVnFvshZg"]),  // Red blood cells
        ("ob5U8zPbAX4", ["kY8FEq0teOs", "C_H-ONQFjpQ"]),  // Anatomy of a neuron
        ("xx9xNJlPOJo", ["xN3UV5FsBkU", "pkEiHZAtoro"]),  // Comparative advantage specialization and gains from trade
        ("h8EYEJ32oQ8", ["k3aKKasOmIw"]),  // Statistics intro: Mean, median and mode
        ("ijLc52LmFQg", ["LLKX_4DHE3I"]),  // Phases of meiosis
        ("1xSQlwWGT8M", ["IFKnq9QM6_A"]),  // Introduction to the atom
        ("7AOOlxbZN3E", ["jR_XZyhLSA8"]),  // Schlieffen Plan and the First Battle of the Marne
        ("GcjgWov7mTM", ["nh1R-gyY7es", "DuArVnT1i-E"]),  // Introduction to evolution and natural selection
        ("0b2Tl0x-niw", ["nBw6KvU51BE", "TSTLLFJbaA4"]),  // Tragedy of the commons
        ("FE2jfTXAJHg", ["juM2ROSLWfw", "2f7YwCtHcgk"]),  // Glycolysis
    ]

    func testTheShippedCatalogueImportsOnceAndRecommendationsStayInTheTopicAndFindWhatBelongs() throws {
        let first = try importCatalogue(Self.shipped)
        XCTAssertEqual(first.status, 0, first.log)
        XCTAssertTrue(first.log.contains("\"added\":5824"), first.log)
        let again = try importCatalogue(Self.shipped)
        XCTAssertEqual(again.status, 0)
        XCTAssertTrue(again.log.contains("\"added\":0") && again.log.contains("\"unchanged\":5824"), "re-import duplicates nothing: \(again.log)")
        XCTAssertEqual(try count("videos"), 5824)
        XCTAssertEqual(try count("topics"), 46)
        XCTAssertEqual(try count("subjects"), 6)

        let subjects = try api.get("/v1/subjects")["items"] as? [[String: Any]] ?? []
        XCTAssertEqual(subjects.first?["name"] as? String, "Math", "in curriculum order")
        let math = subjects.first?["id"] as? String ?? ""
        let topics = try api.get("/v1/subjects/\(math)/topics")["items"] as? [[String: Any]] ?? []
        XCTAssertGreaterThan(topics.count, 5)
        let starter = try api.get("/v1/topics/\(topics[0]["id"] as? String ?? "")/videos?limit=5")["items"] as? [[String: Any]] ?? []
        XCTAssertEqual(starter.compactMap { $0["position"] as? Int }, [1, 2, 3, 4, 5], "the topic's sequence")
        XCTAssertTrue((starter.first?["attribution"] as? String ?? "").contains("Khan Academy"), "credited")
        let found = try api.get("/v1/search?q=photosynthesis%20light%20reactions")["items"] as? [[String: Any]] ?? []
        XCTAssertTrue((found.first?["title"] as? String ?? "").lowercased().contains("photosynthesis"), "ranked search finds it first")

        // Every video: its recommendations never leave its topic and never offer the video itself.
        let all = try database.connect().rows("SELECT id::text AS id, topic_id::text AS topic FROM curation.videos")
            .map { (try $0["id", as: String.self], try $0["topic", as: String.self]) }
        try waitForIndex()
        let topicOf = Dictionary(uniqueKeysWithValues: all)
        var checked = 0, strays = 0, refused: [Int: Int] = [:], firstRefused = ""
        let started = Date()
        for (id, topic) in all {
            let r = try api.get("/v1/videos/\(id)/recommendations?limit=20")
            if r.status != 200 {
                refused[r.status, default: 0] += 1
                if firstRefused.isEmpty { firstRefused = "\(id) (video \(checked + 1)): \(String(decoding: r.body, as: UTF8.self))" }
            }
            for item in r["items"] as? [[String: Any]] ?? [] {
                let other = item["id"] as? String ?? ""
                if other == id || topicOf[other] != topic || item["topicId"] as? String != topic { strays += 1 }
            }
            checked += 1
        }
        print("recommendations for all \(checked) videos in \(Int(Date().timeIntervalSince(started))) s; strays: \(strays)")
        XCTAssertEqual(refused, [:], "every video has recommendations; the first refused: \(firstRefused)")
        XCTAssertEqual(strays, 0, "recommendations never leave the topic")

        // Relevance: what a student should see next to each hand-picked video is in its first ten.
        var recall = 0.0
        for (query, expected) in Self.relevance {
            let top = (try api.get("/v1/videos/\(try video(query))/recommendations?limit=10")["items"] as? [[String: Any]] ?? [])
                .compactMap { $0["youtubeId"] as? String }
            recall += Double(Set(expected).intersection(top).count) / Double(expected.count)
        }
        recall /= Double(Self.relevance.count)
        print("recall@10 over \(Self.relevance.count) hand-labelled videos: \(String(format: "%.2f", recall))")
        XCTAssertGreaterThanOrEqual(Self.relevance.count, 20)
        XCTAssertGreaterThanOrEqual(recall, 0.75)
    }

    func testAScrollNeverRepeatsOrSkipsAndComesRoundToTheLeastRecentlyShown() throws {
        XCTAssertEqual(try importCatalogue(try catalogueFile(first: 40)).status, 0)
        let topic: String = try database.connect().first("SELECT topic_id::text AS t FROM curation.videos GROUP BY topic_id ORDER BY count(*) DESC LIMIT 1")!["t"]
        let ids = try database.connect().rows("SELECT id::text AS id FROM curation.videos WHERE topic_id = $1::uuid ORDER BY position", [topic])
            .map { try $0["id", as: String.self] }
        XCTAssertGreaterThan(ids.count, 10)
        try waitForIndex()
        var shown: [String] = []
        var cursor: String?
        for _ in 0..<100 where shown.count < (ids.count - 1) * 2 {
            let page = try api.get("/v1/videos/\(ids[0])/recommendations?limit=7" + (cursor.map { "&cursor=\($0)" } ?? ""))
            shown += (page["items"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
            cursor = page["nextCursor"] as? String
            XCTAssertNotNil(cursor, "endless")
        }
        let firstPass = Array(shown.prefix(ids.count - 1))
        XCTAssertEqual(Set(firstPass), Set(ids.dropFirst()), "every other video of the topic once, none skipped")
        XCTAssertEqual(firstPass.count, Set(firstPass).count, "no repeats within the pass")
        XCTAssertEqual(Array(shown.dropFirst(ids.count - 1).prefix(ids.count - 1)), firstPass, "then round again, least recently shown first")
        XCTAssertEqual(firstPass.first, ids[1], "the next video of the sequence comes first")
        assertClientError(try api.get("/v1/videos/\(ids[1])/recommendations?cursor=\(cursor ?? "")"), 400, "a cursor belongs to its scroll")
    }

    func testBadLinesAreReportedWithTheirNumbersAndTheRestIsImported() throws {
        let file = try catalogueFile(first: 3, extra: [
            "{not json",
            #"{"youtubeId": "short", "title": "x", "description": "", "durationSeconds": 1, "channel": "c", "subject": "s", "topic": "t", "subtopic": "u", "path": ["s"]}"#,
            #"{"youtubeId": "abcdefghijk", "description": "", "durationSeconds": 1, "channel": "c", "subject": "s", "topic": "t", "subtopic": "u", "path": ["s"]}"#,
            #"{"youtubeId": "abcdefghijk", "title": "Fine", "description": "", "durationSeconds": 60, "channel": "c", "subject": "S", "topic": "T", "subtopic": "U", "path": ["S", "T"]}"#,
        ])
        let result = try importCatalogue(file)
        XCTAssertEqual(result.status, 65, "some lines were skipped")
        for line in [4, 5, 6] { XCTAssertTrue(result.log.contains("\"line\":\(line)"), "line \(line) is reported: \(result.log)") }
        XCTAssertEqual(try count("videos"), 4, "the good lines are imported")
        let missing = try ServiceProcess("curation", environment: ["DATABASE_URL": database.url], arguments: ["import", "/nonexistent.jsonl"])
        missing.process.waitUntilExit()
        XCTAssertEqual(missing.process.terminationStatus, 66)
    }
}

final class CurationLibraryTests: CurationTestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        XCTAssertEqual(try importCatalogue(try catalogueFile(first: 12)).status, 0)
        try waitForIndex()
    }

    func testAStudentLikesWatchesCommentsAndCollectsPlaylistsOthersSeeOnlyWhenPublic() throws {
        let ana = try person(), bo = try person()
        let probe = try EventProbe(topics: ["video.liked", "video.watched", "video.commented", "playlist.updated"])
        let ids = try database.connect().rows("SELECT id::text AS id FROM curation.videos ORDER BY position LIMIT 3").map { try $0["id", as: String.self] }
        XCTAssertEqual(try api.send("PUT", "/v1/videos/\(ids[0])/like", token: ana.token).status, 204)
        XCTAssertEqual(try api.send("PUT", "/v1/videos/\(ids[0])/like", token: ana.token).status, 204, "liking twice is one like")
        let seen = try api.get("/v1/videos/\(ids[0])", token: ana.token)
        XCTAssertEqual(seen["likeCount"] as? Int, 1)
        XCTAssertEqual(seen["liked"] as? Bool, true)
        let path = try database.connect().first("SELECT path FROM curation.videos WHERE id = $1::uuid", [ids[0]])?["path", as: String.self]
        XCTAssertEqual(seen["path"] as? [String], path?.components(separatedBy: " > "), "the path in its parts")
        XCTAssertGreaterThan((seen["path"] as? [String])?.count ?? 0, 1)
        XCTAssertEqual(try api.get("/v1/videos/\(ids[0])")["liked"] as? Bool, false, "anonymous readers see counts")
        XCTAssertEqual(try api.post("/v1/videos/\(ids[1])/watched", ["seconds": 120, "completed": true], token: ana.token).status, 204)
        XCTAssertEqual((try api.get("/v1/users/me/history", token: ana.token)["items"] as? [[String: Any]])?.count, 1)
        XCTAssertEqual((try api.get("/v1/users/me/likes", token: ana.token)["items"] as? [[String: Any]])?.count, 1)
        let topicVideos = try api.get("/v1/topics/\(seen["topicId"] as? String ?? "")/videos", token: ana.token)["items"] as? [[String: Any]] ?? []
        XCTAssertEqual(topicVideos.last?["id"] as? String, ids[1], "the watched video goes after the unwatched ones")

        // With her history the scroll is hers: it goes on for her, and is refused to someone else.
        let firstPage = try api.get("/v1/videos/\(ids[2])/recommendations?limit=2", token: ana.token)
        XCTAssertEqual(firstPage.status, 200)
        let cursor = firstPage["nextCursor"] as? String ?? ""
        let secondPage = try api.get("/v1/videos/\(ids[2])/recommendations?limit=2&cursor=\(cursor)", token: ana.token)
        XCTAssertEqual(secondPage.status, 200)
        let seenIds = ((firstPage["items"] as? [[String: Any]] ?? []) + (secondPage["items"] as? [[String: Any]] ?? [])).compactMap { $0["id"] as? String }
        XCTAssertEqual(Set(seenIds).count, 4, "no repeats across pages")
        assertClientError(try api.get("/v1/videos/\(ids[2])/recommendations?cursor=\(cursor)", token: bo.token), 400, "another's scroll")

        let comment = try api.post("/v1/videos/\(ids[0])/comments", ["text": "  Clear explanation  "], token: ana.token)
        XCTAssertEqual(comment.status, 201)
        XCTAssertEqual(comment["text"] as? String, "Clear explanation")
        let commentId = comment["id"] as? String ?? ""
        XCTAssertEqual((try api.get("/v1/videos/\(ids[0])/comments")["items"] as? [[String: Any]])?.count, 1)
        assertClientError(try api.send("DELETE", "/v1/comments/\(commentId)", token: bo.token), 403, code: "forbidden", "another's comment")
        XCTAssertEqual(try api.send("DELETE", "/v1/comments/\(commentId)", token: ana.token).status, 204)

        let list = try api.post("/v1/playlists", ["name": "Revision", "description": "For the exam"], token: ana.token)
        XCTAssertEqual(list.status, 201)
        let listId = list["id"] as? String ?? ""
        XCTAssertEqual(list["public"] as? Bool, false)
        for v in ids { XCTAssertEqual(try api.post("/v1/playlists/\(listId)/items", ["videoId": v], token: ana.token).status, 200) }
        let reordered = try api.send("PUT", "/v1/playlists/\(listId)/order", json: ["videoIds": Array(ids.reversed())], token: ana.token)
        XCTAssertEqual((reordered["videos"] as? [[String: Any]])?.compactMap { $0["id"] as? String }, Array(ids.reversed()))
        assertClientError(try api.get("/v1/playlists/\(listId)", token: bo.token), 404, code: "not_found", "a private playlist")
        XCTAssertEqual((try api.get("/v1/users/\(ana.id)/profile", token: bo.token)["playlists"] as? [[String: Any]])?.count, 0)
        XCTAssertEqual(try api.patch("/v1/playlists/\(listId)", ["public": true], token: ana.token)["public"] as? Bool, true)
        XCTAssertEqual(try api.get("/v1/playlists/\(listId)", token: bo.token).status, 200)
        assertClientError(try api.post("/v1/playlists/\(listId)/items", ["videoId": ids[0]], token: bo.token), 403, "not the owner")
        let profile = try api.get("/v1/users/\(ana.id)/profile", token: bo.token)
        XCTAssertEqual((profile["playlists"] as? [[String: Any]])?.first?["name"] as? String, "Revision", "on her profile")
        XCTAssertNotNil(profile["name"] as? String)

        XCTAssertEqual(try api.get("/v1/users/me/preferences", token: ana.token)["theme"] as? String, "system")
        XCTAssertEqual(try api.send("PUT", "/v1/users/me/preferences", json: ["theme": "sepia", "autoplay": false], token: ana.token)["theme"] as? String, "sepia")
        XCTAssertEqual(try api.get("/v1/users/me/preferences", token: ana.token)["autoplay"] as? Bool, false)

        for type in ["video.liked", "video.watched", "video.commented", "playlist.updated"] {
            guard let event = probe.first({ $0["type"] as? String == type }) else { XCTFail("no \(type)"); continue }
            XCTAssertEqual(try SchemaValidator.event(type).validate(event.filter { !$0.key.hasPrefix("_") }), [], type)
            XCTAssertEqual(event["_key"] as? String, event["subject"] as? String)
        }
        XCTAssertFalse(probe.seen.contains { String(describing: $0).contains("Clear explanation") }, "comment text stays out of events")
    }

    func testEveryPersonalRouteNeedsATokenAndRefusesBadInput() throws {
        let ana = try person()
        let video = try database.connect().first("SELECT id::text AS id FROM curation.videos LIMIT 1")!["id", as: String.self]
        let list = try api.post("/v1/playlists", ["name": "L"], token: ana.token)["id"] as? String ?? ""
        for (method, path) in [("POST", "/v1/videos/\(video)/watched"), ("GET", "/v1/users/me/history"), ("PUT", "/v1/videos/\(video)/like"),
                               ("DELETE", "/v1/videos/\(video)/like"), ("GET", "/v1/users/me/likes"), ("POST", "/v1/videos/\(video)/comments"),
                               ("POST", "/v1/playlists"), ("GET", "/v1/playlists"), ("GET", "/v1/playlists/\(list)"),
                               ("GET", "/v1/users/me/preferences"), ("PUT", "/v1/users/me/preferences")] {
            assertClientError(try api.send(method, path, json: [String: Any]()), 401, "\(method) \(path)")
        }
        let bodies: [[UInt8]] = [[], Array("{".utf8), Array("[]".utf8), Array(#"{"unknown": 1}"#.utf8),
                                 Array(#"{"seconds": "x", "text": 5, "name": [], "videoId": "no", "videoIds": [1], "theme": "neon"}"#.utf8),
                                 [0x7B, 0x22, 0x74, 0x65, 0x78, 0x74, 0x22, 0x3A, 0x22, 0xC3, 0x28, 0x22, 0x7D]]
        for (method, path) in [("POST", "/v1/videos/\(video)/watched"), ("POST", "/v1/videos/\(video)/comments"), ("POST", "/v1/playlists"),
                               ("PATCH", "/v1/playlists/\(list)"), ("POST", "/v1/playlists/\(list)/items"), ("PUT", "/v1/playlists/\(list)/order"),
                               ("PUT", "/v1/users/me/preferences")] {
            for body in bodies {
                assertClientError(try api.send(method, path, raw: body, token: ana.token, headers: ["Content-Type": "application/json"]), nil,
                                  "\(method) \(path) \(String(decoding: body, as: UTF8.self))")
            }
        }
        assertClientError(try api.post("/v1/videos/\(video)/watched", ["seconds": -1], token: ana.token), 400)
        assertClientError(try api.send("PUT", "/v1/playlists/\(list)/order", json: ["videoIds": [video]], token: ana.token), 400, "not its items")
        assertClientError(try api.post("/v1/playlists/\(list)/items", ["videoId": UUID().uuidString], token: ana.token), 400, "no such video")
        for path in ["/v1/videos/\(UUID().uuidString)", "/v1/videos/nope", "/v1/topics/\(UUID().uuidString)/videos",
                     "/v1/subjects/\(UUID().uuidString)/topics", "/v1/videos/\(UUID().uuidString)/recommendations"] {
            assertClientError(try api.get(path), 404, path)
        }
        for query in ["q=", "q=x&topic=nope", "q=x&cursor=junk", "q=x&limit=0"] { assertClientError(try api.get("/v1/search?\(query)"), 400, query) }
        assertClientError(try api.get("/v1/videos/\(video)/recommendations?topic=\(UUID().uuidString)"), 400, "another topic")
        assertClientError(try api.get("/v1/videos/\(video)", token: "not-a-token"), 401, "a bad token is refused, not ignored")
        XCTAssertEqual(try count("likes"), 0)
        XCTAssertEqual(try count("watches"), 0)
    }
}

/// `curation import-youtube` against a stand-in for the YouTube Data API v3, with its response shapes.
final class YouTubeImportTests: CurationTestCase {
    var youtube: HTTPServer!
    override func tearDown() { youtube?.stop(grace: 0); super.tearDown() }

    func startStandIn() throws -> Int {
        let port = TestEnvironment.freePort()
        let videos: [String: (String, String)] = ["yt000000001": ("Fractions on a number line", "PT4M13S"),
                                                  "yt000000002": ("Adding fractions", "PT1H2M3S"), "yt000000003": ("Fraction word problems", "PT58S")]
        youtube = HTTPServer(port: UInt16(port), threads: 2, route: { _, _ in .notFound }) { request, _ in
            func json(_ object: Any, _ status: Int = 200) -> Response {
                Response(status: status, headers: [("Content-Type", "application/json")],
                         body: Array((try? JSONSerialization.data(withJSONObject: object)) ?? Data()))
            }
            guard request.query["key"] == "test-key" else {
                return json(["error": ["code": 400, "errors": [["reason": "keyInvalid"]]]], 400)
            }
            switch request.path {
            case "/youtube/v3/search":
                if request.query["pageToken"] == "p2" {
                    if request.query["q"] == "quota" { return json(["error": ["code": 403, "errors": [["reason": "quotaExceeded"]]]], 403) }
                    return json(["items": [["id": ["kind": "youtube#video", "videoId": "yt000000003"]]]])
                }
                return json(["nextPageToken": "p2", "items": [["id": ["kind": "youtube#video", "videoId": "yt000000001"]],
                                                              ["id": ["kind": "youtube#video", "videoId": "yt000000002"]]]])
            case "/youtube/v3/videos":
                let ids = (request.query["id"] ?? "").split(separator: ",").map(String.init)
                return json(["items": ids.compactMap { id in videos[id].map { ["id": id, "snippet": ["title": $0.0, "description": "About \($0.0)",
                                                                                               "channelTitle": "Maths Channel"],
                                                                             "contentDetails": ["duration": $0.1]] } }])
            case "/youtube/v3/captions":
                return json(["items": request.query["videoId"] == "yt000000001" ? [["id": "c1", "snippet": ["language": "en"]]] : []])
            default:
                return json(["error": ["code": 404]], 404)
            }
        }
        try youtube.start()
        return port
    }

    func importYouTube(_ port: Int, topic: String, query: String, key: String = "test-key") throws -> (Int32, String) {
        let p = try ServiceProcess("curation", environment: ["DATABASE_URL": database.url, "YOUTUBE_API_KEY": key,
                                                             "YOUTUBE_API_URL": "http://127.0.0.1:\(port)/youtube/v3"],
                                   arguments: ["import-youtube", "--topic", topic, "--query", query])
        p.process.waitUntilExit()
        return (p.process.terminationStatus, p.log)
    }

    func testVideosFoundOnYouTubeJoinTheTopicOncePageAfterPage() throws {
        XCTAssertEqual(try importCatalogue(try catalogueFile(first: 5)).status, 0)
        let topic: String = try database.connect().first("SELECT topic_id::text AS t FROM curation.videos LIMIT 1")!["t"]
        let before = try count("videos", "topic_id = '\(topic)'")
        let port = try startStandIn()
        let (status, log) = try importYouTube(port, topic: topic, query: "fractions")
        XCTAssertEqual(status, 0, log)
        XCTAssertTrue(log.contains("\"added\":3") && log.contains("\"withCaptions\":1"), log)
        let rows = try database.connect().rows("""
            SELECT youtube_id, position, duration_seconds, channel, subtopic FROM curation.videos WHERE topic_id = \(topic)::uuid AND youtube_id LIKE 'yt%' ORDER BY position
            """)
        XCTAssertEqual(try rows.map { try $0["youtube_id", as: String.self] }, ["yt000000001", "yt000000002", "yt000000003"], "both pages, in search order")
        XCTAssertEqual(try rows.map { try $0["position", as: Int.self] }, [before + 1, before + 2, before + 3], "after the topic's last video")
        XCTAssertEqual(try rows.map { try $0["duration_seconds", as: Int.self] }, [253, 3723, 58])
        XCTAssertEqual(try rows.first?["channel", as: String.self], "Maths Channel")
        let again = try importYouTube(port, topic: topic, query: "fractions")
        XCTAssertEqual(again.0, 0)
        XCTAssertTrue(again.1.contains("\"added\":0"), "a re-run duplicates nothing: \(again.1)")
        XCTAssertEqual(try count("videos", "youtube_id LIKE 'yt%'"), 3)
    }

    func testAQuotaErrorKeepsWhatWasImportedAndABadKeyIsNamed() throws {
        XCTAssertEqual(try importCatalogue(try catalogueFile(first: 2)).status, 0)
        let topic: String = try database.connect().first("SELECT topic_id::text AS t FROM curation.videos LIMIT 1")!["t"]
        let port = try startStandIn()
        let (status, log) = try importYouTube(port, topic: topic, query: "quota")
        XCTAssertEqual(status, 75, log)
        XCTAssertTrue(log.contains("quota"), log)
        XCTAssertEqual(try count("videos", "youtube_id LIKE 'yt%'"), 2, "the first page stays")
        let refused = try importYouTube(port, topic: topic, query: "fractions", key: "wrong")
        XCTAssertEqual(refused.0, 77)
        XCTAssertTrue(refused.1.contains("YOUTUBE_API_KEY"), refused.1)
        let noTopic = try importYouTube(port, topic: UUID().uuidString, query: "fractions")
        XCTAssertEqual(noTopic.0, 66)
    }
}
