import ChatCore
import Crypto
import Foundation
import HTTP
import Kafka
import Models
import Runtime
import ServiceKit
import XCTest

/// A test case with its own database, auth, and chat on the shared broker.
class ChatTestCase: ServiceTestCase {
    override var serviceName: String { "chat" }

    /// Its consumer group holds its partitions before the test runs, so no test stops it mid-join (which can
    /// hang later joins in Tansu).
    override func setUpWithError() throws {
        try super.setUpWithError()
        try waitForServiceConsumers()
    }

    /// A team room created by `owner`, joined by `others`.
    func room(_ owner: Person, joinedBy others: [Person] = [], name: String = "Project") throws -> String {
        let r = try api.post("/v1/rooms", ["name": name, "topic": "What we do"], token: owner.token)
        XCTAssertEqual(r.status, 201, String(decoding: r.body, as: UTF8.self))
        let code = r["inviteCode"] as? String ?? ""
        for p in others { XCTAssertEqual(try api.post("/v1/rooms/join", ["inviteCode": code], token: p.token).status, 200) }
        return r["id"] as? String ?? ""
    }

    @discardableResult
    func post(_ room: String, _ text: String, as p: Person, clientId: String? = nil, port: Int? = nil) throws -> APIResponse {
        try Self.post(port: port ?? api.port, room, text, token: p.token, clientId: clientId)
    }

    /// A message posted from a thread of its own.
    static func post(port: Int, _ room: String, _ text: String, token: String, clientId: String? = nil) throws -> APIResponse {
        var body: [String: Any] = ["text": text]
        if let clientId { body["clientId"] = clientId }
        return try APIClient(port: port).post("/v1/rooms/\(room)/messages", body, token: token)
    }

    /// Publishes an event as another service would (for what chat learns from stories and dispatch).
    func publish<P: EventPayload>(_ payload: P, subject: String, source: String) throws {
        try EventProbe.publish(payload, subject: subject, source: source)
    }

    /// The next event of `stream` named `name`, skipping others.
    func next(_ stream: SSEReader, _ name: String, timeout: TimeInterval = 15) -> (data: [String: Any], id: String?)? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline, let e = stream.next(timeout: deadline.timeIntervalSinceNow) {
            if e.event == name { return ((try? JSONSerialization.jsonObject(with: Data(e.data.utf8))) as? [String: Any] ?? [:], e.id) }
        }
        return nil
    }
}

final class ChatFlowTests: ChatTestCase {
    func testTwoPeopleChatKeepATodoListAndSeeEachOtherLive() throws {
        let ann = try person("ann" + UUID().uuidString.prefix(6).lowercased()), ben = try person()
        let room = try room(ann, joinedBy: [ben])
        let stream = try SSEReader(port: api.port, path: "/v1/rooms/\(room)/events", token: ben.token)
        XCTAssertEqual(stream.status, 200)

        let posted = try post(room, "  Hello Ben  ", as: ann)
        XCTAssertEqual(posted.status, 201)
        XCTAssertEqual(posted["text"] as? String, "Hello Ben", "text is trimmed")
        XCTAssertEqual(posted["seq"] as? Int, 1)
        XCTAssertEqual((posted["author"] as? [String: Any])?["id"] as? String, ann.id)
        let live = next(stream, "message_created")
        XCTAssertEqual(live?.data["text"] as? String, "Hello Ben", "Ben sees it live, with its text")
        XCTAssertNotNil(live?.id)

        XCTAssertEqual(try post(room, "Hi Ann, shall we plan the launch?", as: ben).status, 201)
        let todo = try api.post("/v1/rooms/\(room)/todos", ["title": "Write the launch post", "assigneeId": ben.id], token: ann.token)
        XCTAssertEqual(todo.status, 201, String(decoding: todo.body, as: UTF8.self))
        XCTAssertEqual(next(stream, "todo_created")?.data["title"] as? String, "Write the launch post")
        let todoId = todo["id"] as? String ?? ""
        let done = try api.patch("/v1/todos/\(todoId)", ["done": true], token: ben.token)
        XCTAssertEqual(done["done"] as? Bool, true)
        XCTAssertEqual((done["doneBy"] as? [String: Any])?["id"] as? String, ben.id, "who checked it off is kept")
        XCTAssertNotNil(done["doneAt"] as? String)
        XCTAssertEqual((next(stream, "todo_updated")?.data["doneBy"] as? [String: Any])?["id"] as? String, ben.id)

        let history = try api.get("/v1/rooms/\(room)/messages", token: ben.token)
        XCTAssertEqual((history["items"] as? [[String: Any]])?.compactMap { $0["seq"] as? Int }, [1, 2])
        let found = try api.get("/v1/rooms/\(room)/search?q=launch", token: ann.token)
        XCTAssertEqual((found["items"] as? [[String: Any]])?.compactMap { $0["text"] as? String }, ["Hi Ann, shall we plan the launch?"])

        // Unread counts and read state.
        let mine = try api.get("/v1/rooms", token: ben.token)["items"] as? [[String: Any]] ?? []
        XCTAssertEqual(mine.first?["unreadCount"] as? Int, 1, "Ann's message, not his own")
        XCTAssertEqual((mine.first?["lastMessage"] as? [String: Any])?["seq"] as? Int, 2)
        XCTAssertEqual(try api.send("PUT", "/v1/rooms/\(room)/read", json: ["seq": 2], token: ben.token).status, 200)
        XCTAssertEqual((try api.get("/v1/rooms", token: ben.token)["items"] as? [[String: Any]])?.first?["unreadCount"] as? Int, 0)

        // Edits and deletions keep their place.
        let edited = try api.patch("/v1/messages/\(posted["id"] as? String ?? "")", ["text": "Hello, Ben"], token: ann.token)
        XCTAssertEqual(edited["text"] as? String, "Hello, Ben")
        XCTAssertNotNil(edited["editedAt"] as? String)
        XCTAssertEqual(next(stream, "message_edited")?.data["text"] as? String, "Hello, Ben")
        assertClientError(try api.patch("/v1/messages/\(posted["id"] as? String ?? "")", ["text": "mine now"], token: ben.token), 403)
        XCTAssertEqual(try api.send("DELETE", "/v1/messages/\(posted["id"] as? String ?? "")", token: ann.token).status, 204)
        let deleted = next(stream, "message_deleted")?.data
        XCTAssertTrue(deleted?["text"] is NSNull, "a deleted message keeps its place with no text")
        let after = try api.get("/v1/rooms/\(room)/messages", token: ben.token)["items"] as? [[String: Any]] ?? []
        XCTAssertEqual(after.compactMap { $0["seq"] as? Int }, [1, 2])
        XCTAssertTrue(after.first?["text"] is NSNull)
        XCTAssertEqual(try count("changes", "body LIKE '%Hello%'"), 0, "its text is gone from the stored changes too")
    }

    func testARetryWithTheSameClientIdOrIdempotencyKeyReturnsTheFirstMessage() throws {
        let ann = try person()
        let room = try room(ann)
        let first = try post(room, "only once", as: ann, clientId: "c-123")
        let again = try post(room, "only once", as: ann, clientId: "c-123")
        XCTAssertEqual(first.status, 201)
        XCTAssertEqual(again.status, 200)
        XCTAssertEqual(again["id"] as? String, first["id"] as? String)
        // Ten retries at once from a flaky network: still one message.
        let results = LockedBox<[String]>()
        let (port, token) = (api.port, ann.token)
        let threads = (0..<10).map { _ in
            Thread {
                if let id = try? Self.post(port: port, room, "burst", token: token, clientId: "c-burst")["id"] as? String {
                    results.update { $0 = ($0 ?? []) + [id] }
                }
            }
        }
        threads.forEach { $0.start() }
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 30) { (results.get() ?? []).count == 10 })
        XCTAssertEqual(Set(results.get() ?? []).count, 1)
        // A client without ids of its own sends an Idempotency-Key, as to every route that creates.
        let key = ["Idempotency-Key": UUID().uuidString]
        let keyed = try api.post("/v1/rooms/\(room)/messages", ["text": "keyed"], token: ann.token, headers: key)
        let keyedAgain = try api.post("/v1/rooms/\(room)/messages", ["text": "keyed"], token: ann.token, headers: key)
        XCTAssertEqual([keyed.status, keyedAgain.status], [201, 201])
        XCTAssertEqual(keyedAgain["id"] as? String, keyed["id"] as? String)
        XCTAssertEqual(keyedAgain.headers["idempotent-replayed"], "true")
        XCTAssertEqual(try count("messages", "room_id = '\(room)'"), 3)
        XCTAssertEqual(try count("changes", "room_id = '\(room)' AND event = 'message_created'"), 3)
    }

    func testTwentyClientsPostingAtOnceGetAGapFreeSequence() throws {
        let people = try (0..<4).map { _ in try person() }
        let room = try room(people[0], joinedBy: Array(people.dropFirst()))
        let port = api.port
        let tokens = people.map(\.token)
        let done = LockedBox<Int>()
        let threads = (0..<20).map { t in
            Thread {
                for i in 0..<5 { _ = try? Self.post(port: port, room, "t\(t) m\(i)", token: tokens[t % 4]) }
                done.update { $0 = ($0 ?? 0) + 1 }
            }
        }
        threads.forEach { $0.start() }
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 60) { done.get() == 20 })
        let seqs = try database.connect().rows("SELECT seq FROM chat.messages WHERE room_id = \(room) ORDER BY seq").map { try $0["seq", as: Int.self] }
        XCTAssertEqual(seqs, Array(1...100), "strictly increasing and gap-free")
        let changes = try database.connect().rows("SELECT seq FROM chat.changes WHERE room_id = \(room) ORDER BY seq").map { try $0["seq", as: Int.self] }
        XCTAssertEqual(changes, Array(1...changes.count), "the room's change log is gap-free too")
        var all: [Int] = []
        var cursor: String?
        repeat {
            let page = try api.get("/v1/rooms/\(room)/messages?limit=30" + (cursor.map { "&cursor=\($0)" } ?? ""), token: people[1].token)
            all = ((page["items"] as? [[String: Any]]) ?? []).compactMap { $0["seq"] as? Int } + all
            cursor = page["nextCursor"] as? String
        } while cursor != nil
        XCTAssertEqual(all, Array(1...100), "history pages back through every message once")
    }

    func testAStreamReconnectingWithLastEventIDGetsExactlyWhatItMissed() throws {
        let ann = try person(), ben = try person()
        let room = try room(ann, joinedBy: [ben])
        try post(room, "before", as: ann)
        var stream: SSEReader? = try SSEReader(port: api.port, path: "/v1/rooms/\(room)/events", token: ben.token)
        try post(room, "seen", as: ann)
        let seen = next(stream!, "message_created")
        XCTAssertEqual(seen?.data["text"] as? String, "seen")
        stream = nil  // the network drops
        for i in 1...50 { try post(room, "missed \(i)", as: ann) }
        let back = try SSEReader(port: api.port, path: "/v1/rooms/\(room)/events", token: ben.token,
                                 headers: ["Last-Event-ID": seen?.id ?? ""])
        var texts: [String] = [], ids: [Int] = []
        while texts.count < 50, let e = next(back, "message_created", timeout: 10) {
            texts.append(e.data["text"] as? String ?? ""); ids.append(Int(e.id ?? "") ?? -1)
        }
        XCTAssertEqual(texts, (1...50).map { "missed \($0)" }, "exactly the 50 missed, in order")
        XCTAssertEqual(ids, ids.sorted())
        try post(room, "live again", as: ann)
        XCTAssertEqual(next(back, "message_created")?.data["text"] as? String, "live again", "then live, with no duplicate between")

        // An empty Last-Event-ID names no event: the stream starts live. One this stream never sent is 400, naming it.
        let fresh = try SSEReader(port: api.port, path: "/v1/rooms/\(room)/events", token: ben.token, headers: ["Last-Event-ID": ""])
        XCTAssertEqual(fresh.status, 200)
        try post(room, "for the fresh one", as: ann)
        XCTAssertEqual(next(fresh, "message_created")?.data["text"] as? String, "for the fresh one", "nothing older first")
        let refused = try api.send("GET", "/v1/rooms/\(room)/events", token: ben.token, headers: ["Last-Event-ID": "seven"])
        XCTAssertEqual(refused.status, 400)
        XCTAssertEqual((refused["error"] as? [String: Any])?["field"] as? String, "Last-Event-ID")
    }

    /// A browser's `EventSource` cannot send a header: it opens the stream with a ticket, once.
    func testAStreamTicketOpensOneStreamOnceAndIsNoBearerToken() throws {
        let ann = try person(), ben = try person()
        let room = try room(ann, joinedBy: [ben])
        func ticket(_ p: Person) throws -> String {
            let r = try accounts.post("/v1/auth/stream-tickets", token: p.token)
            XCTAssertEqual(r.status, 201, String(decoding: r.body, as: UTF8.self))
            XCTAssertEqual(r.headers["cache-control"], "no-store")
            XCTAssertEqual(r["expiresIn"] as? Int, 60)
            return r["ticket"] as? String ?? ""
        }
        XCTAssertEqual(try accounts.post("/v1/auth/stream-tickets").status, 401, "a ticket needs a token")
        let t = try ticket(ben)
        let stream = try SSEReader(port: api.port, path: "/v1/rooms/\(room)/events?ticket=\(t)", token: nil)
        XCTAssertEqual(stream.status, 200)
        try post(room, "by ticket", as: ann)
        XCTAssertEqual(next(stream, "message_created")?.data["text"] as? String, "by ticket")

        XCTAssertEqual(try SSEReader(port: api.port, path: "/v1/rooms/\(room)/events?ticket=\(t)", token: nil).status, 401,
                       "a ticket opens one stream only (a browser's automatic reconnect must get a new one)")
        XCTAssertEqual(try api.get("/v1/rooms", token: t).status, 401, "a ticket is not a bearer token")
        XCTAssertEqual(try SSEReader(port: api.port, path: "/v1/rooms/\(room)/events?ticket=\(ben.token)", token: nil).status, 401,
                       "a bearer token is not a ticket")
        let outsider = try person()
        XCTAssertEqual(try SSEReader(port: api.port, path: "/v1/rooms/\(room)/events?ticket=\(try ticket(outsider))", token: nil).status,
                       404, "a ticket opens only the streams its holder may see")
        let tampered = try ticket(ben).split(separator: ".").enumerated().map { $0 == 1 ? Substring(Base64URL.encode(Array(
            #"{"sub":"\#(outsider.id)"}"#.utf8))) : $1 }.joined(separator: ".")
        XCTAssertEqual(try SSEReader(port: api.port, path: "/v1/rooms/\(room)/events?ticket=\(tampered)", token: nil).status, 401)

        XCTAssertEqual(try accounts.post("/v1/auth/logout", token: ben.token).status, 204)
        let afterLogout = try ticket(ann)
        XCTAssertEqual(try accounts.post("/v1/auth/logout", token: ann.token).status, 204)
        XCTAssertEqual(try accounts.post("/v1/auth/stream-tickets", token: ben.token).status, 401, "no ticket for an ended session")
        XCTAssertTrue(try TestEnvironment.waitUntil(timeout: 15) { try api.get("/v1/rooms", token: ann.token).status == 401 },
                      "chat hears of the logout")
        XCTAssertEqual(try SSEReader(port: api.port, path: "/v1/rooms/\(room)/events?ticket=\(afterLogout)", token: nil).status, 401,
                       "a ticket of a session since ended opens nothing")
    }

    func testAMessagePostedOnOneInstanceReachesAStreamOnAnother() throws {
        let second = try startInstance(ownGroups: true)  // fan-out goes through the live feed, not a consumer group
        defer { second.stop() }
        try waitForConsumers(second)
        let ann = try person(), ben = try person()
        let room = try room(ann, joinedBy: [ben])
        let stream = try SSEReader(port: second.port, path: "/v1/rooms/\(room)/events", token: ben.token)
        XCTAssertEqual(try post(room, "across instances", as: ann, port: service.port).status, 201)
        XCTAssertEqual(next(stream, "message_created")?.data["text"] as? String, "across instances")
    }

    func testARemovedMembersStreamEndsAtOnce() throws {
        let ann = try person(), ben = try person()
        let room = try room(ann, joinedBy: [ben])
        let stream = try SSEReader(port: api.port, path: "/v1/rooms/\(room)/events", token: ben.token)
        assertClientError(try api.send("DELETE", "/v1/rooms/\(room)/members/\(ann.id)", token: ben.token), 403)
        XCTAssertEqual(try api.send("DELETE", "/v1/rooms/\(room)/members/\(ben.id)", token: ann.token).status, 204)
        XCTAssertEqual((next(stream, "member_left")?.data["user"] as? [String: Any])?["id"] as? String, ben.id)
        XCTAssertNil(stream.next(timeout: 5), "no more events")
        XCTAssertTrue(stream.ended, "the server ended the stream")
        assertClientError(try api.get("/v1/rooms/\(room)/messages", token: ben.token), 404, "outside now")
    }
}

/// Direct rooms and parcel conversations, from what chat learns on stories' and dispatch's topics.
final class ChatDirectoryTests: ChatHarnessCase {
    func testDirectRoomsOnlyBetweenPeopleWhoShareAGroupAndOnePerPair() throws {
        let ann = try person(), ben = try person(), eve = try person()
        let group = UUID().uuidString.lowercased()
        assertClientError(try service.send("POST", "/v1/rooms/direct", json: ["userId": ben.id], as: ann), 403, code: "forbidden", "strangers")
        try service.deliver(GroupCreated(groupId: group.uuid, kind: .group, name: "Family", createdBy: ann.id.uuid, createdAt: Date()),
                            subject: group, source: "/stories")
        try service.deliver(GroupMemberJoined(groupId: group.uuid, userId: ben.id.uuid, role: .member, joinedAt: Date()),
                            subject: group, source: "/stories")
        XCTAssertEqual(try service.count("group_members", "group_id = '\(group)'"), 2)
        let ids = LockedBox<[String]>()
        let harness = service!
        DispatchQueue.concurrentPerform(iterations: 10) { i in
            let who = i % 2 == 0 ? ann : ben
            let other = i % 2 == 0 ? ben : ann
            if let id = try? harness.post("/v1/rooms/direct", ["userId": other.id], as: who, ChatViews.Room.self).view.id {
                ids.update { $0 = ($0 ?? []) + [id] }
            }
        }
        XCTAssertEqual((ids.get() ?? []).count, 10)
        XCTAssertEqual(Set(ids.get() ?? []).count, 1, "one direct room per pair, whatever the concurrency")
        XCTAssertEqual(try service.count("rooms", "kind = 'direct'"), 1)
        assertClientError(try service.send("POST", "/v1/rooms/direct", json: ["userId": eve.id], as: ann), 403, code: "forbidden",
                          "Eve shares nothing with Ann")
        assertClientError(try service.send("GET", "/v1/rooms/\(ids.get()?.first ?? "")", as: eve), 404)

        try service.deliver(GroupMemberLeft(groupId: group.uuid, userId: ben.id.uuid, reason: .left, removedBy: ben.id.uuid, newAdminId: nil,
                                            leftAt: Date()), subject: group, source: "/stories")
        XCTAssertEqual(try service.count("group_members", "group_id = '\(group)'"), 1)
        assertClientError(try service.send("POST", "/v1/rooms/direct", json: ["userId": ben.id], as: ann), 403, code: "forbidden",
                          "no longer share a group")
    }

    func testAParcelConversationOpensOnAssignmentAndTurnsReadOnlyOnDelivery() throws {
        let sender = try person(), courier = try person(), recipient = try person()
        let parcel = UUID().uuidString.lowercased()
        let now = Date()
        try service.deliver(ParcelCreated(parcelId: parcel.uuid, senderId: sender.id.uuid, recipientUserId: recipient.id.uuid, service: .express,
                                          pickup: Place(lat: 44.4, lon: 26.1), dropoff: Place(lat: 44.5, lon: 26.2), amountMinor: 900,
                                          currency: "EUR", createdAt: now), subject: parcel, source: "/dispatch")
        try service.deliver(ParcelStatusChanged(parcelId: parcel.uuid, from: .offered, to: .assigned, actor: .courier, actorId: courier.id.uuid,
                                                courierId: courier.id.uuid, place: nil, at: now), subject: parcel, source: "/dispatch")
        let room = try service.get("/v1/rooms?parcelId=\(parcel)", as: sender, Listing<ChatViews.Room>.self).view.items.first
        XCTAssertNotNil(room)
        XCTAssertEqual(try service.count("members", "room_id = '\(room?.id ?? "")'"), 3, "the conversation opens with sender, courier and recipient")
        let id = room?.id ?? ""
        XCTAssertEqual(room?.kind, "parcel")
        XCTAssertEqual(try post(id, "I am at the door", as: courier).status, 201)
        XCTAssertEqual(try post(id, "Coming down", as: sender).status, 201)
        XCTAssertEqual(try service.get("/v1/rooms/\(id)/messages", as: recipient, Listing<ChatViews.Created>.self).view.items.count, 2)
        assertClientError(try service.send("DELETE", "/v1/rooms/\(id)/members/\(sender.id)", as: sender), 409)

        try service.deliver(ParcelStatusChanged(parcelId: parcel.uuid, from: .delivered, to: .received, actor: .recipient,
                                                actorId: recipient.id.uuid, courierId: courier.id.uuid, place: nil, at: now),
                            subject: parcel, source: "/dispatch")
        XCTAssertEqual(try service.get("/v1/rooms/\(id)", as: sender, ChatViews.Room.self).view.readOnly, true)
        assertClientError(try post(id, "one more thing", as: sender), 409, code: "conflict", "read-only after delivery")
        XCTAssertEqual(try service.get("/v1/rooms/\(id)/messages", as: courier, Listing<ChatViews.Created>.self).view.items.count, 2,
                       "still readable")
    }

    func testACourierTakenOffAParcelBeforePickupLeavesItsConversationAndTheNextOneJoins() throws {
        let sender = try person(), eva = try person(), ben = try person()
        let parcel = UUID().uuidString.lowercased()
        let now = Date()
        try service.deliver(ParcelCreated(parcelId: parcel.uuid, senderId: sender.id.uuid, recipientUserId: nil, service: .standard,
                                          pickup: Place(lat: 44.4, lon: 26.1), dropoff: Place(lat: 44.5, lon: 26.2), amountMinor: 900,
                                          currency: "EUR", createdAt: now), subject: parcel, source: "/dispatch")
        try service.deliver(ParcelStatusChanged(parcelId: parcel.uuid, from: .offered, to: .assigned, actor: .courier, actorId: eva.id.uuid,
                                                courierId: eva.id.uuid, place: nil, at: now), subject: parcel, source: "/dispatch")
        let id = try service.get("/v1/rooms?parcelId=\(parcel)", as: sender, Listing<ChatViews.Room>.self).view.items.first?.id ?? ""
        XCTAssertEqual(try post(id, "The code is 4711", as: sender).status, 201)

        // Suspended before pickup: dispatch withdraws it, naming no courier.
        try service.deliver(ParcelStatusChanged(parcelId: parcel.uuid, from: .assigned, to: .awaitingCourier, actor: .system, actorId: nil,
                                                courierId: nil, place: nil, at: now), subject: parcel, source: "/dispatch")
        assertClientError(try service.send("GET", "/v1/rooms/\(id)/messages", as: eva), 404, "no longer hers to read")
        assertClientError(try post(id, "Still coming", as: eva), 404)
        let left = try service.get("/v1/rooms/\(id)/messages", as: sender, Listing<ChatViews.Created>.self).view.items
        XCTAssertEqual(left.count, 1)
        XCTAssertEqual(try service.count("members", "room_id = '\(id)'"), 1, "the sender alone until the next courier")

        try service.deliver(ParcelStatusChanged(parcelId: parcel.uuid, from: .offered, to: .assigned, actor: .courier, actorId: ben.id.uuid,
                                                courierId: ben.id.uuid, place: nil, at: now), subject: parcel, source: "/dispatch")
        XCTAssertEqual(try post(id, "On my way", as: ben).status, 201, "the next courier joins the same conversation")
        assertClientError(try service.send("GET", "/v1/rooms/\(id)/messages", as: eva), 404)
    }
}

/// Chat in-process (`Harness`): people and their profiles as auth's events would make them.
class ChatHarnessCase: HarnessTestCase {
    override var serviceName: String { "chat" }
    override var make: (Environment) throws -> ServiceApp { ChatService.makeApp }

    /// A team room created by `owner`, joined by `others`.
    func room(_ owner: Person, joinedBy others: [Person] = [], name: String = "Project") throws -> String {
        let (status, room) = try service.post("/v1/rooms", ["name": name, "topic": "What we do"], as: owner, ChatViews.Room.self)
        XCTAssertEqual(status, 201)
        for p in others { XCTAssertEqual(try service.send("POST", "/v1/rooms/join", json: ["inviteCode": room.inviteCode ?? ""], as: p).status, 200) }
        return room.id
    }

    func post(_ room: String, _ text: String, as p: Person) throws -> APIResponse {
        try service.send("POST", "/v1/rooms/\(room)/messages", json: ["text": text], as: p)
    }
}

/// What the tests read of chat's answers.
enum ChatViews {
    struct Room: Decodable { let id: String, kind: String, inviteCode: String?, readOnly: Bool }
    struct Todo: Decodable { let id: String, position: Int? }
    struct Created: Decodable { let id: String }
}

final class ChatRulesTests: ChatHarnessCase {
    func testOutsidersGet404AndMembersWhoMayNotActGet403OnEveryRoute() throws {
        let owner = try person(), member = try person(), outsider = try person()
        let room = try room(owner, joinedBy: [member])
        let message = try post(room, "hello", as: owner).decode(ChatViews.Created.self).id
        let todo = try service.post("/v1/rooms/\(room)/todos", ["title": "x"], as: owner, ChatViews.Created.self).view.id
        let photo = try service.send("POST", "/v1/chat/media", raw: Images.png, as: owner, headers: ["Content-Type": "image/png"])
            .decode(ChatViews.Created.self).id
        let routes: [(String, String, [String: Any]?)] = [
            ("GET", "/v1/rooms/\(room)", nil), ("PATCH", "/v1/rooms/\(room)", ["name": "n"]),
            ("POST", "/v1/rooms/\(room)/invite-code", nil), ("DELETE", "/v1/rooms/\(room)/members/\(member.id)", nil),
            ("PUT", "/v1/rooms/\(room)/read", ["seq": 1]), ("POST", "/v1/rooms/\(room)/messages", ["text": "x"]),
            ("GET", "/v1/rooms/\(room)/messages", nil), ("GET", "/v1/rooms/\(room)/search?q=hello", nil),
            ("PATCH", "/v1/messages/\(message)", ["text": "x"]), ("DELETE", "/v1/messages/\(message)", nil),
            ("GET", "/v1/rooms/\(room)/events", nil), ("POST", "/v1/rooms/\(room)/typing", nil),
            ("GET", "/v1/rooms/\(room)/todos", nil), ("POST", "/v1/rooms/\(room)/todos", ["title": "x"]),
            ("PATCH", "/v1/todos/\(todo)", ["done": true]), ("DELETE", "/v1/todos/\(todo)", nil), ("GET", "/v1/chat/media/\(photo)", nil),
        ]
        for (method, path, body) in routes {
            assertClientError(try service.send(method, path, json: body, as: outsider), 404, code: "not_found", "\(method) \(path)")
            assertClientError(try service.send(method, path, json: body), 401, "\(method) \(path)")
        }
        for (method, path, body) in [("PATCH", "/v1/rooms/\(room)", ["name": "n"]), ("POST", "/v1/rooms/\(room)/invite-code", nil),
                                     ("DELETE", "/v1/rooms/\(room)/members/\(owner.id)", nil),
                                     ("PATCH", "/v1/messages/\(message)", ["text": "x"]), ("DELETE", "/v1/messages/\(message)", nil)] as [(String, String, [String: Any]?)] {
            assertClientError(try service.send(method, path, json: body, as: member), 403, code: "forbidden", "\(method) \(path)")
        }
        XCTAssertEqual(try service.count("messages", "room_id = '\(room)'"), 1)
        XCTAssertEqual(try service.count("members", "room_id = '\(room)'"), 2)
    }

    func testEveryRouteRefusesBadInputWithAClearClientError() throws {
        let ann = try person()
        let room = try room(ann)
        let before = try service.count("changes", "room_id = '\(room)'")
        let bodies: [[UInt8]] = [[], Array("{".utf8), Array("[]".utf8), Array(#"{"unknown": 1}"#.utf8),
                                 Array(#"{"text": 5, "title": [], "name": {}, "seq": "x", "inviteCode": 1, "userId": "no"}"#.utf8),
                                 [0x7B, 0x22, 0x74, 0x65, 0x78, 0x74, 0x22, 0x3A, 0x22, 0xC3, 0x28, 0x22, 0x7D]]
        let message = try post(room, "x", as: ann).decode(ChatViews.Created.self).id
        let todo = try service.post("/v1/rooms/\(room)/todos", ["title": "t"], as: ann, ChatViews.Created.self).view.id
        let withBody = [("POST", "/v1/rooms"), ("PATCH", "/v1/rooms/\(room)"), ("POST", "/v1/rooms/join"), ("POST", "/v1/rooms/direct"),
                        ("PUT", "/v1/rooms/\(room)/read"), ("POST", "/v1/rooms/\(room)/messages"), ("PATCH", "/v1/messages/\(message)"),
                        ("POST", "/v1/rooms/\(room)/todos"), ("PATCH", "/v1/todos/\(todo)")]
        let changes = try service.count("changes", "room_id = '\(room)'")
        for (method, path) in withBody {
            for body in bodies {
                let r = try service.send(method, path, raw: body, as: ann, headers: ["Content-Type": "application/json"])
                assertClientError(r, nil, "\(method) \(path) \(String(decoding: body, as: UTF8.self))")
            }
        }
        for (body, field) in [(["text": ""], "text"), (["text": "   "], "text"), (["text": String(repeating: "é", count: 4001)], "text"),
                              (["text": "x", "clientId": String(repeating: "c", count: 65)], "clientId"),
                              (["text": "x", "replyTo": UUID().uuidString], "replyTo"),
                              (["text": "x", "mediaIds": [UUID().uuidString]], "mediaIds")] as [([String: Any], String)] {
            let r = try service.send("POST", "/v1/rooms/\(room)/messages", json: body, as: ann)
            assertClientError(r, 400, "\(body.keys.sorted())")
            XCTAssertEqual(r.errorField, field)
        }
        for path in ["/v1/rooms/not-a-uuid", "/v1/rooms/\(UUID().uuidString)/messages", "/v1/rooms/\(UUID().uuidString)/todos"] {
            assertClientError(try service.send("GET", path, as: ann), 404, path)
        }
        assertClientError(try service.send("PATCH", "/v1/todos/\(UUID().uuidString)", json: ["done": true], as: ann), 404)
        for query in ["?before=-1", "?after=x", "?before=1&after=2", "?limit=0", "?cursor=junk"] {
            assertClientError(try service.send("GET", "/v1/rooms/\(room)/messages\(query)", as: ann), 400, query)
        }
        // The kit checks every declared query parameter against its shape: the same error, naming the parameter.
        for (query, field) in [("?before=-1", "before"), ("?after=x", "after"), ("?limit=0", "limit"), ("?limit=1e3", "limit"),
                               ("?limit=7&before=2.5", "before")] {
            let r = try service.send("GET", "/v1/rooms/\(room)/messages\(query)", as: ann)
            XCTAssertEqual(r.errorCode, "validation_failed", query)
            XCTAssertEqual(r.errorField, field, query)
        }
        XCTAssertEqual(try service.send("GET", "/v1/rooms/\(room)/messages?limit=0").status, 401, "the credentials first: a 400 tells an outsider nothing")
        XCTAssertEqual(try service.send("GET", "/v1/rooms?parcelId=nope", as: ann).errorField, "parcelId")
        assertClientError(try service.send("GET", "/v1/rooms/\(room)/search?q=", as: ann), 400)
        assertClientError(try service.send("GET", "/v1/rooms?parcelId=nope", as: ann), 400)
        assertClientError(try service.send("PATCH", "/v1/todos/\(todo)", json: ["assigneeId": UUID().uuidString], as: ann), 400, "not a member")
        for _ in 0..<10 { _ = try service.send("POST", "/v1/rooms/join", json: ["inviteCode": "AAAA-BBBB-CCCC"], as: ann) }
        assertClientError(try service.send("POST", "/v1/rooms/join", json: ["inviteCode": "AAAA-BBBB-CCCC"], as: ann), 429, code: "rate_limited")
        XCTAssertEqual(try service.count("changes", "room_id = '\(room)'"), changes, "no refused request changed anything")
        XCTAssertGreaterThan(changes, before)
    }

    func testTwoMembersReorderingAtOnceNeverLoseAnItem() throws {
        let ann = try person(), ben = try person()
        let room = try room(ann, joinedBy: [ben])
        let ids = try (1...8).map { try service.post("/v1/rooms/\(room)/todos", ["title": "item \($0)"], as: ann, ChatViews.Created.self).view.id }
        let done = LockedBox<Int>()
        let harness = service!
        DispatchQueue.concurrentPerform(iterations: 2) { k in
            let who = [ann, ben][k]
            for i in 0..<10 {
                _ = try? harness.send("PATCH", "/v1/todos/\(ids[(i * 3 + k) % 8])", json: ["position": (i * 5 + k) % 8 + 1], as: who)
            }
            done.update { $0 = ($0 ?? 0) + 1 }
        }
        XCTAssertEqual(done.get(), 2)
        let list = try service.get("/v1/rooms/\(room)/todos", as: ben, Listing<ChatViews.Todo>.self).view.items
        XCTAssertEqual(Set(list.map(\.id)), Set(ids), "every item is still there")
        XCTAssertEqual(list.compactMap(\.position), Array(1...8), "in one order, without holes")
        let checked = try service.patch("/v1/todos/\(ids[0])", ["done": true], as: ben, ChatViews.Todo.self).view
        XCTAssertNil(checked.position)
        let open = try service.get("/v1/rooms/\(room)/todos", as: ann, Listing<ChatViews.Todo>.self).view.items
        XCTAssertEqual(open.last?.id, ids[0], "done items come after the open ones")
    }
}

/// Chat's events on the broker, the ephemeral typing among them (it never passes through the outbox).
final class ChatEventTests: ChatTestCase {
    func testEveryChatEventMatchesItsSchema() throws {
        let types = ["chat.room_created", "chat.room_updated", "chat.member_joined", "chat.member_left", "chat.message_created",
                     "chat.message_edited", "chat.message_deleted", "todo.created", "todo.updated", "todo.deleted", "chat.typing"]
        let probe = try EventProbe(topics: types)
        let ann = try person(), ben = try person()
        let room = try room(ann, joinedBy: [ben])
        let message = try post(room, "secret text", as: ann)["id"] as? String ?? ""
        _ = try api.patch("/v1/messages/\(message)", ["text": "edited secret"], token: ann.token)
        _ = try api.send("DELETE", "/v1/messages/\(message)", token: ann.token)
        _ = try api.patch("/v1/rooms/\(room)", ["topic": "new"], token: ann.token)
        let todo = try api.post("/v1/rooms/\(room)/todos", ["title": "t"], token: ann.token)["id"] as? String ?? ""
        _ = try api.patch("/v1/todos/\(todo)", ["done": true], token: ben.token)
        _ = try api.send("DELETE", "/v1/todos/\(todo)", token: ann.token)
        _ = try api.send("POST", "/v1/rooms/\(room)/typing", token: ben.token)
        _ = try api.send("DELETE", "/v1/rooms/\(room)/members/\(ben.id)", token: ann.token)
        for type in types {
            // A minute for the first, which waits for the relay to publish anything at all on a busy machine; the
            // rest have come by then.
            guard let event = probe.first(timeout: 60, { $0["type"] as? String == type && $0["subject"] as? String == room }) else {
                XCTFail("no \(type) event for the room"); continue
            }
            XCTAssertEqual(try SchemaValidator.event(type).validate(event.filter { !$0.key.hasPrefix("_") }), [], type)
            XCTAssertEqual(event["_key"] as? String, room, "keyed by the room")
        }
        let all = probe.seen.filter { $0["subject"] as? String == room }
        XCTAssertFalse(all.contains { String(describing: $0).contains("secret") }, "texts stay out of the events")
        let seqs = all.compactMap { $0.data("seq") as? Int }
        XCTAssertEqual(seqs.sorted(), Array(1...seqs.count), "one event per stored change, each with its sequence")
    }
}
