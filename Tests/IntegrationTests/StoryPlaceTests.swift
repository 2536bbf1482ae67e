import Foundation
import Models
import Postgres
@testable import StoriesCore
import XCTest

/// A place the author chooses (issue 68): kept and shown only as finely as they chose, in every view of the story, in
/// the newsletter (JSON, HTML and the mail notify sends, which is the copy stories renders), in `story.created`, in
/// the export, and gone with the account; trips in the newsletter; hostile places refused with a clear 400.
final class StoryPlaceTests: StoriesHarnessCase {
    static let serviceToken = String(repeating: "s", count: 40)
    override var settings: [String: String] { ["SERVICE_TOKEN": Self.serviceToken] }

    var job: Newsletters {
        Newsletters(pool: service.app.pool, storage: StoriesStorage(), outbox: service.app.outbox, cache: NewsletterCache())
    }

    /// Lyon's town hall, as a phone's location would give it.
    let lyon: [String: Any] = ["name": "Lyon", "latitude": 45.767_299, "longitude": 4.834_329, "precision": "city"]
    /// What may never show of it at city precision: any digit past the first decimal.
    let finer = ["45.76", "45.77", "4.83", "4.834", "767299", "834329"]

    func story(_ who: Person, _ group: String, _ text: String, place: [String: Any]? = nil, media: [String]? = nil,
               file: StaticString = #filePath, line: UInt = #line) throws -> [String: Any] {
        var body: [String: Any] = ["text": text, "groupIds": [group]]
        if let place { body["place"] = place }
        if let media { body["mediaIds"] = media }
        let r = try service.send("POST", "/v1/stories", json: body, as: who)
        XCTAssertEqual(r.status, 201, String(decoding: r.body, as: UTF8.self), file: file, line: line)
        return r.json
    }

    /// Moves a story to `at`, as if it had been posted then.
    func move(_ story: [String: Any], to at: String) throws {
        let id = try XCTUnwrap(UUID(uuidString: story["id"] as? String ?? ""))
        let c = try service.database.connect()
        try c.execute("UPDATE stories.stories SET created_at = \(Timestamp.parse(at)!) WHERE id = \(id)")
        try c.execute("UPDATE stories.story_groups SET created_at = \(Timestamp.parse(at)!) WHERE story_id = \(id)")
    }

    /// Compiles the group's current period (as the scan does when it closes) and returns the stored newsletter's id.
    func compile(_ group: String) throws -> String {
        let id = try XCTUnwrap(UUID(uuidString: group))
        try service.database.connect().execute("UPDATE stories.groups SET newsletter_due_at = NULL WHERE id = \(id)")
        try job.compileDueNewsletters(now: Date())
        let close = try XCTUnwrap(try service.database.connect().first("SELECT newsletter_due_at AS at FROM stories.groups WHERE id = \(id)")?["at", as: Date.self])
        XCTAssertEqual(try job.compileDueNewsletters(now: close.addingTimeInterval(1)), 1)
        return try XCTUnwrap(try service.events(NewsletterCompiled.self).last { $0.payload.groupId == id }?.payload.newsletterId.lowercased)
    }

    /// A request with the services' credential (notify's, asking for a mail's copy; auth's, for an export).
    func trusted(_ path: String) throws -> APIResponse {
        let r = try service.send("GET", path, headers: ["Authorization": "Bearer \(Self.serviceToken)"])
        XCTAssertEqual(r.status, 200, String(decoding: r.body, as: UTF8.self))
        return r
    }

    func place(_ json: Any?) -> [String: Any]? { json as? [String: Any] }
    func stories(_ newsletter: [String: Any]) -> [[String: Any]] {
        (newsletter["members"] as? [[String: Any]] ?? []).flatMap { ($0["days"] as? [[String: Any]] ?? []).flatMap { $0["stories"] as? [[String: Any]] ?? [] } }
    }

    func assertCityOnly(_ text: String, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(text.contains("Lyon"), "\(what) names the city", file: file, line: line)
        for digits in finer { XCTAssertFalse(text.contains(digits), "\(what) shows no finer coordinates (\(digits))", file: file, line: line) }
    }

    func assertCityPlace(_ json: Any?, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        let p = place(json)
        XCTAssertEqual(p?["name"] as? String, "Lyon", what, file: file, line: line)
        XCTAssertEqual(p?["latitude"] as? Double, 45.8, what, file: file, line: line)
        XCTAssertEqual(p?["longitude"] as? Double, 4.8, what, file: file, line: line)
        XCTAssertEqual(p?["precision"] as? String, "city", what, file: file, line: line)
    }

    func testACityPlaceShowsTheCityAndNoFinerCoordinatesInEveryViewAndTheMail() throws {
        let ann = try person(), ben = try person()
        let family = try group(ann)
        XCTAssertEqual(try join(ben, family).status, 200)
        let posted = try story(ann, family.id, "Market morning", place: lyon)
        let id = posted["id"] as? String ?? ""
        assertCityPlace(posted["place"], "the answer to the post")

        // What is kept: the rounded coordinates alone.
        let row = try XCTUnwrap(try service.database.connect().first("""
            SELECT place_latitude::text AS lat, place_longitude::text AS lon FROM stories.stories WHERE id = \(UUID(uuidString: id)!)
            """))
        XCTAssertEqual([try row["lat", as: String.self], try row["lon", as: String.self]], ["45.8", "4.8"])

        // Every view of the story.
        var views: [(String, APIResponse)] = [
            ("the story", try service.send("GET", "/v1/stories/\(id)", as: ben)),
            ("the group's list", try service.send("GET", "/v1/groups/\(family.id)/stories", as: ben)),
            ("my stories", try service.send("GET", "/v1/users/me/stories", as: ann)),
            ("the newsletter", try service.send("GET", "/v1/groups/\(family.id)/newsletter", as: ben)),
            ("the newsletter's HTML", try service.send("GET", "/v1/groups/\(family.id)/newsletter?format=html", as: ben)),
        ]
        assertCityPlace(views[0].1["place"], "the story")
        assertCityPlace((views[1].1["items"] as? [[String: Any]])?.first?["place"], "the group's list")
        assertCityPlace((views[2].1["items"] as? [[String: Any]])?.first?["place"], "my stories")
        assertCityPlace(stories(views[3].1.json).first?["place"], "the newsletter")
        XCTAssertTrue(String(decoding: views[4].1.body, as: UTF8.self).contains("📍 Lyon"))

        // The period closes: the stored newsletter, and the mail notify sends of it (subject, text and HTML).
        let newsletter = try compile(family.id)
        views.append(("the stored newsletter", try service.send("GET", "/v1/groups/\(family.id)/newsletters/\(newsletter)", as: ben)))
        views.append(("the stored newsletter's HTML",
                      try service.send("GET", "/v1/groups/\(family.id)/newsletters/\(newsletter)?format=html", as: ben)))
        assertCityPlace(stories(views[5].1.json).first?["place"], "the stored newsletter")
        let mail = try trusted("/v1/internal/newsletters/\(newsletter)/copies/\(ben.id)")
        XCTAssertTrue((mail["html"] as? String ?? "").contains("📍 Lyon"), "the mail's HTML")
        XCTAssertTrue((mail["text"] as? String ?? "").contains("Place: Lyon"), "the mail's text")
        views.append(("the mail", mail))
        for (what, r) in views {
            XCTAssertEqual(r.status, 200, what)
            assertCityOnly(String(decoding: r.body, as: UTF8.self), what)
        }

        // The event says the same, and fits its schema.
        let event = try XCTUnwrap(try service.outbox("story.created").last?.event)
        assertCityOnly(event, "story.created")
        XCTAssertEqual(try service.events(StoryCreated.self).last?.payload.place,
                       StoryPlace(name: "Lyon", latitude: 45.8, longitude: 4.8, precision: .city))
        let envelope = try JSONSerialization.jsonObject(with: Data(event.utf8))
        XCTAssertEqual(try SchemaValidator.event("story.created").validate(envelope), [])
    }

    func testEachPrecisionKeepsItsOwnGridAndAPlaceIsChangedOrTakenAway() throws {
        let ann = try person()
        let journal = try group(ann, name: "Travels")
        let tower: [String: Any] = ["name": "Eiffel Tower", "latitude": 48.858_370_4, "longitude": 2.294_481_3]
        let exact = try story(ann, journal.id, "Up", place: tower.merging(["precision": "exact"]) { $1 })
        XCTAssertEqual(place(exact["place"])?["latitude"] as? Double, 48.85837)
        XCTAssertEqual(place(exact["place"])?["longitude"] as? Double, 2.29448)
        let near = try story(ann, journal.id, "Nearby", place: tower.merging(["precision": "neighbourhood"]) { $1 })
        XCTAssertEqual(place(near["place"])?["latitude"] as? Double, 48.86)
        XCTAssertEqual(place(near["place"])?["longitude"] as? Double, 2.29)
        // Just west of Greenwich at city precision is 0, not -0; the poles and the date line are places too.
        let greenwich = try story(ann, journal.id, "Zero", place: ["name": "Greenwich", "latitude": 51.4779, "longitude": -0.0015, "precision": "city"])
        XCTAssertEqual(place(greenwich["place"])?["longitude"] as? Double, 0)
        let written = String(decoding: try service.send("GET", "/v1/stories/\(greenwich["id"] as? String ?? "")", as: ann).body, as: UTF8.self)
        XCTAssertTrue(written.contains(#""longitude":0,"#), written)
        _ = try story(ann, journal.id, "Pole", place: ["name": "South Pole", "latitude": -90, "longitude": 180, "precision": "exact"])

        // Changed by its author (rounded again), then taken away with null.
        let id = exact["id"] as? String ?? ""
        let moved = try service.send("PATCH", "/v1/stories/\(id)", json: ["place": ["name": "Trocadéro", "latitude": 48.862_04,
                                                                                     "longitude": 2.287_59, "precision": "neighbourhood"]], as: ann)
        XCTAssertEqual(moved.status, 200, String(decoding: moved.body, as: UTF8.self))
        XCTAssertEqual(place(moved["place"])?["name"] as? String, "Trocadéro")
        XCTAssertEqual(place(moved["place"])?["latitude"] as? Double, 48.86)
        let kept = try service.send("PATCH", "/v1/stories/\(id)", json: ["text": "Up there"], as: ann)
        XCTAssertEqual(place(kept["place"])?["name"] as? String, "Trocadéro", "a change that does not name the place keeps it")
        let cleared = try service.send("PATCH", "/v1/stories/\(id)", json: ["place": NSNull()], as: ann)
        XCTAssertEqual(cleared.status, 200)
        XCTAssertTrue(cleared["place"] is NSNull, "null takes it away")

        // A photo's location is never a place: a photo with GPS in its Exif gives a story without one.
        let photo = try upload(Images.jpeg, ann, contentType: "image/jpeg")
        XCTAssertEqual(photo.status, 201)
        let pictured = try story(ann, journal.id, "", media: [photo["id"] as? String ?? ""])
        XCTAssertTrue(pictured["place"] is NSNull)
        XCTAssertNil(try service.events(StoryCreated.self).last?.payload.place)
        XCTAssertFalse(try service.outbox("story.created").last?.event.contains("\"place\"") ?? true, "no place in its event")
    }

    func testHostilePlacesGetAClearErrorAndChangeNothing() throws {
        let ann = try person()
        let journal = try group(ann, name: "Hostile")
        func place(_ changes: [String: Any?]) -> [String: Any] {
            var p = lyon
            for (k, v) in changes { p[k] = v ?? NSNull() }
            return p
        }
        let cases: [(String, Any, String)] = [
            ("a latitude past the pole", place(["latitude": 90.000_01]), "place.latitude"),
            ("a latitude below", place(["latitude": -91]), "place.latitude"),
            ("a longitude past the date line", place(["longitude": 180.5]), "place.longitude"),
            ("a longitude below", place(["longitude": -1e300]), "place.longitude"),
            ("NaN as text", place(["latitude": "NaN"]), "place.latitude"),
            ("a null latitude", place(["latitude": nil]), "place.latitude"),
            ("no longitude", lyon.filter { $0.key != "longitude" }, "place.longitude"),
            ("an unknown precision", place(["precision": "street"]), "place.precision"),
            ("a precision in capitals", place(["precision": "CITY"]), "place.precision"),
            ("no precision", lyon.filter { $0.key != "precision" }, "place.precision"),
            ("an empty name", place(["name": ""]), "place.name"),
            ("a blank name", place(["name": "   "]), "place.name"),
            ("a long name", place(["name": String(repeating: "é", count: 101)]), "place.name"),
            ("a bell in the name", place(["name": "Lyon\u{07}"]), "place.name"),
            ("a line break in the name", place(["name": "Lyon\nCedex"]), "place.name"),
            ("an unknown field", place(["altitude": 170]), "place.altitude"),
            ("a place as text", "Lyon", "place"),
            ("a place as a list", [45.7, 4.8], "place"),
        ]
        for (what, value, field) in cases {
            let r = try service.send("POST", "/v1/stories", json: ["text": "x", "groupIds": [journal.id], "place": value], as: ann)
            assertClientError(r, 400, code: "validation_failed", what)
            XCTAssertEqual(r.errorField, field, what)
        }
        // What JSON cannot hold: NaN, infinities, numbers too large for a double.
        for literal in ["NaN", "Infinity", "-Infinity", "1e999", "-1e400"] {
            let raw = #"{"text":"x","groupIds":["\#(journal.id)"],"place":{"name":"Lyon","latitude":\#(literal),"longitude":4.8,"precision":"city"}}"#
            let r = try service.send("POST", "/v1/stories", raw: Array(raw.utf8), as: ann, headers: ["Content-Type": "application/json"])
            assertClientError(r, 400, code: "invalid_json", literal)
        }
        XCTAssertEqual(try service.count("stories"), 0, "nothing was posted")

        // A change gets the same checks, and changes nothing when refused.
        let posted = try story(ann, journal.id, "Fine", place: lyon)
        let r = try service.send("PATCH", "/v1/stories/\(posted["id"] as? String ?? "")", json: ["place": place(["latitude": 123])], as: ann)
        assertClientError(r, 400, code: "validation_failed")
        XCTAssertEqual(r.errorField, "place.latitude")
        XCTAssertEqual(self.place(try service.send("GET", "/v1/stories/\(posted["id"] as? String ?? "")", as: ann)["place"])?["latitude"] as? Double, 45.8)
    }

    /// Travel moments: consecutive stories of a member sharing a place name make a trip, shown with its place (no finer
    /// than its coarsest story) and its days, in the JSON, the HTML and the mail.
    func testConsecutiveStoriesAtOnePlaceMakeATripInTheNewsletter() throws {
        let ann = try person(), ben = try person()
        let family = try group(ann)
        XCTAssertEqual(try join(ben, family).status, 200)
        let lisbon: [String: Any] = ["name": "Lisbon", "latitude": 38.722_252, "longitude": -9.139_337, "precision": "neighbourhood"]
        let porto: [String: Any] = ["name": "Porto", "latitude": 41.157_944, "longitude": -8.629_105, "precision": "exact"]
        var ids: [String] = []
        for (who, text, place, at) in [
            (ann, "Arrived", lisbon, "2026-11-16T10:00:00Z"),
            (ann, "Trams", lisbon.merging(["name": "lisbon", "precision": "city"]) { $1 }, "2026-11-17T10:00:00Z"),
            (ann, "Pastéis", lisbon, "2026-11-17T18:00:00Z"),
            (ann, "Home for a day", nil, "2026-11-18T10:00:00Z"),
            (ann, "Bridges", porto, "2026-11-19T10:00:00Z"),
            (ann, "Port wine", porto, "2026-11-20T10:00:00Z"),
            (ann, "Lisbon again, once", lisbon, "2026-11-21T10:00:00Z"),
            (ben, "One day in Lisbon", lisbon, "2026-11-17T12:00:00Z"),
        ] as [(Person, String, [String: Any]?, String)] {
            let s = try story(who, family.id, text, place: place)
            try move(s, to: at)
            ids.append(s["id"] as? String ?? "")
        }
        let period = "from=2026-11-15T18:00:00Z&to=2026-11-22T18:00:00Z"
        let doc = try service.send("GET", "/v1/groups/\(family.id)/newsletter?\(period)", as: ben)
        XCTAssertEqual(doc.status, 200)
        let trips = doc["trips"] as? [[String: Any]] ?? []
        XCTAssertEqual(trips.map { $0["memberId"] as? String }, [ann.id, ann.id], "two trips of Ann's; Ben's one story and Ann's last are none")
        XCTAssertEqual(trips.map { $0["storyIds"] as? [String] ?? [] }, [Array(ids[0...2]), Array(ids[4...5])])
        XCTAssertEqual(trips.map { [$0["from"] as? String, $0["to"] as? String] }, [["2026-11-16", "2026-11-17"], ["2026-11-19", "2026-11-20"]])
        let first = trips.first?["place"] as? [String: Any]
        XCTAssertEqual(first?["name"] as? String, "Lisbon")
        XCTAssertEqual(first?["precision"] as? String, "city", "no finer than its coarsest story")
        XCTAssertEqual([first?["latitude"] as? Double, first?["longitude"] as? Double], [38.7, -9.1])
        XCTAssertEqual((trips.last?["place"] as? [String: Any])?["latitude"] as? Double, 41.15794)

        let html = String(decoding: try service.send("GET", "/v1/groups/\(family.id)/newsletter?\(period)&format=html", as: ben).body, as: UTF8.self)
        XCTAssertTrue(html.contains("Travel moments"))
        XCTAssertTrue(html.contains("in Lisbon, 2026-11-16 to 2026-11-17 (3 stories)"), html)
        XCTAssertTrue(html.contains("in Porto, 2026-11-19 to 2026-11-20 (2 stories)"))

        // Ann's Porto stories taken from the document (as when a story is taken down): the trip goes with them.
        let decoded = try JSONDecoder().decode(NewsletterDocument.self, from: Data(doc.body))
        XCTAssertEqual(decoded.without(story: UUID(uuidString: ids[5])!).trips.count, 1)
        XCTAssertEqual(decoded.without([UUID(uuidString: ann.id)!]).trips.count, 0)
        XCTAssertTrue(NewsletterHTML.text(decoded).contains("Travel moments\n  "), "the mail's text part lists them too")
    }

    func testTheExportCarriesThePlaceAndErasureTakesItEverywhere() throws {
        let ann = try person(), ben = try person()
        let family = try group(ann)
        XCTAssertEqual(try join(ben, family).status, 200)
        _ = try story(ann, family.id, "Market morning", place: lyon)
        let export = try trusted("/v1/internal/users/\(ann.id)/export")
        let mine = (export["stories"] as? [[String: Any]])?.first
        assertCityPlace(mine?["place"], "the export")
        assertCityOnly(String(decoding: export.body, as: UTF8.self), "the export")
        let newsletter = try compile(family.id)

        try service.deliver(UserDeleted(userId: UUID(uuidString: ann.id)!, deletedAt: Date()), subject: ann.id, source: "/auth")
        XCTAssertEqual(try service.count("stories", "place_name IS NOT NULL"), 0)
        XCTAssertEqual(try service.count("newsletters", "content LIKE '%Lyon%'"), 0, "the compiled newsletter lost it")
        let copy = try trusted("/v1/internal/newsletters/\(newsletter)/copies/\(ben.id)")
        XCTAssertFalse(String(decoding: copy.body, as: UTF8.self).contains("Lyon"), "and so has the mail")
    }
}
