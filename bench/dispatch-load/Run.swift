import Foundation
import Models
import HTTP
import Postgres

/// One load run: set up the people and the fleet, drive the service, then check what it did.
///
/// `@unchecked Sendable`: the people are written by `setUp` before any thread starts and only read after; the
/// rest is `Stats` (locked), `Fleet` (disjoint slices) and flags.
final class Run: @unchecked Sendable {
    let o: Options
    let area: Area
    let stats = Stats()
    let fleet: Fleet
    private var seeded: Set<String> = []
    private(set) var senders: [(id: String, token: String, photo: String)] = []
    private(set) var acting: [(id: String, token: String, photo: String)] = []
    /// Where each acting courier was put at set-up: their fixes walk on from there (dispatch refuses a jump no courier
    /// could travel).
    private let starts = Locked([String: (lat: Double, lon: Double)]())
    /// Reception centres the run made (`--centre-share`), each with a staff member's token.
    private(set) var centres: [(id: String, staff: String)] = []
    private let creating = Locked(false), stopping = Locked(false), interrupted = Locked(false)
    private let reservedLock = NSLock()
    private var reserved = 0, finished = 0
    private(set) var setupSeconds = 0.0
    private(set) var driveSeconds = 0.0
    private(set) var createSeconds = 0.0
    /// A real 8 × 8 JPEG: uploads are decoded and re-encoded, so bytes that only look like one are refused.
    static let photo: [UInt8] = {
        let hex = Array([
            "ffd8ffe000104a46494600010100000100010000ffdb004300100b0c0e0c0a100e0d0e1211101318281a181616183123251d",
            "283a333d3c3933383740485c4e404457453738506d51575f626768673e4d71797064785c656763ffdb004301111212181518",
            "2f1a1a2f63423842636363636363636363636363636363636363636363636363636363636363636363636363636363636363",
            "6363636363636363ffc00011080008000803012200021101031101ffc4001f00000105010101010101000000000000000001",
            "02030405060708090a0bffc400b5100002010303020403050504040000017d01020300041105122131410613516107227114",
            "328191a1082342b1c11552d1f02433627282090a161718191a25262728292a3435363738393a434445464748494a53545556",
            "5758595a636465666768696a737475767778797a838485868788898a92939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5",
            "b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae1e2e3e4e5e6e7e8e9eaf1f2f3f4f5f6f7f8f9faffc4001f010003",
            "0101010101010101010000000000000102030405060708090a0bffc400b51100020102040403040705040400010277000102",
            "031104052131061241510761711322328108144291a1b1c109233352f0156272d10a162434e125f11718191a262728292a35",
            "363738393a434445464748494a535455565758595a636465666768696a737475767778797a82838485868788898a92939495",
            "969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae2e3e4e5e6e7e8e9ea",
            "f2f3f4f5f6f7f8f9faffda000c03010002110311003f00928a28af18f58fffd9"
        ].joined().utf8)
        return stride(from: 0, to: hex.count, by: 2).map { UInt8(String(decoding: hex[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
    }()

    init(_ options: Options) {
        o = options
        area = Area(center: options.center, sideKm: options.areaKm)
        fleet = Fleet(count: options.couriers - options.actingCouriers, area: area)
        seeded = Set(fleet.ids)
    }

    func log(_ line: String) { if !o.quiet { FileHandle.standardError.write(Data((line + "\n").utf8)) } }

    /// Runs `body(i)` for i in 0..<count on `threads` threads and waits; the first error is rethrown.
    func parallel(_ count: Int, threads: Int, _ body: @escaping @Sendable (API, API, Int) throws -> Void) throws {
        let next = Locked(0), failure = Locked<Error?>(nil)
        let group = DispatchGroup()
        for _ in 0..<min(threads, max(count, 1)) {
            group.enter()
            Thread { [o] in
                let dispatch = API(o.dispatch), auth = API(o.auth)
                while failure.current == nil, case let i = next.increment(), i < count {
                    do { try body(dispatch, auth, i) } catch { failure.with { $0 = $0 ?? error } }
                }
                group.leave()
            }.start()
        }
        group.wait()
        if let error = failure.current { throw error }
    }

    // MARK: - Setting up

    func setUp() throws {
        let start = Date()
        for (name, url) in [("dispatch", o.dispatch), ("auth", o.auth)] {
            let ready = try? API(url).call("GET", "/readyz")
            guard ready?.status == 200 else {
                throw RunError("\(name) at \(url) is not ready (\(ready.map { "status \($0.status)" } ?? "no answer")); start the stack with deploy/local/stack up")
            }
        }
        log("signing up \(o.senders) senders and \(o.actingCouriers) couriers")
        let people = Locked(Array(repeating: (id: "", token: "", photo: ""), count: o.senders + o.actingCouriers))
        try parallel(o.senders + o.actingCouriers, threads: o.threads) { [self] dispatch, auth, i in
            let name = "load_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16)
            let signUp = ["username": name, "email": "\(name)@load.test", "password": UUID().uuidString, "fullName": "Load \(i)"]
            var r = try auth.call("POST", "/v1/auth/signup", json: signUp)
            // Auth hashes a few passwords at a time and answers 503 to the rest: more threads than that wait their turn.
            for _ in 0..<100 where r.status == 503 {
                Thread.sleep(forTimeInterval: 0.1)
                r = try auth.call("POST", "/v1/auth/signup", json: signUp)
            }
            guard r.status == 201, let token = r["accessToken"] as? String, let id = (r["user"] as? [String: Any])?["id"] as? String else {
                throw RunError("sign-up failed: \(r.status) \(r.json)")
            }
            // A sender's document, or the photo an acting courier delivers with.
            var photo = ""
            if i < o.senders || o.deliver {
                let m = try dispatch.call("POST", "/v1/dispatch/media", raw: Self.photo, token: token, headers: ["Content-Type": "image/jpeg"])
                guard m.status == 201, let id = m["id"] as? String else { throw RunError("photo upload failed: \(m.status) \(m.json)") }
                photo = id
            }
            if i < o.senders {
                people.with { $0[i] = (id, token, photo) }
            } else {
                let p = area.random()
                starts.with { $0[id] = p }
                // Vetted before going online: the courier applies with their documents and the operator approves.
                guard !o.operatorToken.isEmpty else {
                    throw RunError("acting couriers are approved by the operator: --operator-token or OPERATOR_TOKEN")
                }
                var documents: [String: String] = [:]
                for purpose in ["identity", "vehicle"] {
                    let m = try dispatch.call("POST", "/v1/dispatch/media?purpose=\(purpose)", raw: Self.photo, token: token,
                                              headers: ["Content-Type": "image/jpeg"])
                    guard m.status == 201, let media = m["id"] as? String else { throw RunError("\(purpose) photo upload failed: \(m.status) \(m.json)") }
                    documents[purpose] = media
                }
                let application: [String: Any] = ["legalName": "Load Courier", "phone": "+40 700 000 001", "vehicle": "bike", "consent": true,
                                                  "identityPhotoMediaId": documents["identity"]!, "vehiclePhotoMediaId": documents["vehicle"]!]
                for (method, path, body, bearer) in [("POST", "/v1/couriers/me", ["vehicle": "bike", "capacity": o.capacity] as [String: Any], token),
                                                 ("POST", "/v1/couriers/me/application", application, token),
                                                 ("POST", "/v1/operator/couriers/\(id)/approve", ["operator": "dispatch-load"], o.operatorToken),
                                                 ("PUT", "/v1/couriers/me/status", ["online": true], token),
                                                 ("PUT", "/v1/couriers/me/location", ["lat": p.lat, "lon": p.lon], token)] {
                    let r = try dispatch.call(method, path, json: body, token: bearer)
                    guard (200...201).contains(r.status) else { throw RunError("\(method) \(path) failed: \(r.status) \(r.json)") }
                }
                people.with { $0[i] = (id, token, photo) }
            }
        }
        let all = people.current
        senders = Array(all.prefix(o.senders))
        acting = Array(all.dropFirst(o.senders))

        if o.centreShare > 0 { try makeCentres() }

        let batches = (fleet.ids.count + 999) / 1000
        let done = Locked(0)
        try parallel(batches, threads: o.threads) { [self] dispatch, _, b in
            let r = try seed(batch: b, online: true, on: dispatch)
            guard r.status == 200 else { throw RunError("seeding couriers failed: \(r.status) \(r.json)") }
            let n = done.increment() + 1
            if n % 10 == 0 || n == batches { log("seeded couriers \(min(n * 1000, fleet.ids.count))/\(fleet.ids.count)") }
        }
        setupSeconds = Date().timeIntervalSince(start)
        log(String(format: "set up in %.1f s", setupSeconds))
    }

    /// Five reception centres spread over the area, open at all hours, each with a staff member signed up for it.
    private func makeCentres() throws {
        let dispatch = API(o.dispatch), auth = API(o.auth)
        for i in 0..<5 {
            let p = area.random()
            let c = try dispatch.call("POST", "/v1/operator/centres", json: [
                "name": "Load test centre \(i + 1)", "address": "Load test", "lat": p.lat, "lon": p.lon, "timeZone": "UTC",
                "openingHours": (1...7).map { ["day": $0, "opens": "00:00", "closes": "24:00"] }, "acceptsDropOffs": true,
                "acceptsCollections": false], token: o.operatorToken)
            guard c.status == 201, let centre = c["id"] as? String else { throw RunError("creating a centre failed: \(c.status) \(c.json)") }
            let name = "load_staff_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(12)
            let s = try auth.call("POST", "/v1/auth/signup", json: ["username": name, "email": "\(name)@load.test", "password": UUID().uuidString,
                                                                   "fullName": "Load Staff \(i + 1)"])
            guard s.status == 201, let token = s["accessToken"] as? String, let id = (s["user"] as? [String: Any])?["id"] as? String else {
                throw RunError("staff sign-up failed: \(s.status) \(s.json)")
            }
            let g = try dispatch.call("PUT", "/v1/operator/centres/\(centre)/staff/\(id)", token: o.operatorToken)
            guard g.status == 204 else { throw RunError("naming staff failed: \(g.status) \(g.json)") }
            centres.append((centre, token))
        }
        log("made 5 reception centres, each with its staff")
    }

    /// Takes this run's couriers offline, so a later run's parcels are not offered to couriers nobody plays; given
    /// the database, then deletes the seeded ones that hold no parcel, so runs do not pile up courier rows.
    func tearDown() {
        takeOffline()
        guard !o.databaseURL.isEmpty else { return }
        do {
            let c = try Connection(url: o.databaseURL)
            var deleted = 0
            for start in stride(from: 0, to: fleet.ids.count, by: 10_000) {
                let slice = Array(fleet.ids[start..<min(fleet.ids.count, start + 10_000)])
                deleted += try c.execute("DELETE FROM dispatch.couriers WHERE user_id = ANY($1::uuid[]) AND active = 0",
                                         [PostgresArray(slice)])
            }
            log("deleted \(deleted) of the run's \(fleet.ids.count) seeded couriers (those holding a parcel stay, offline)")
        } catch {
            log("could not delete the run's couriers: \(explained(error))")
        }
    }

    private func takeOffline() {
        log("taking the run's couriers offline")
        let batches = (fleet.ids.count + 999) / 1000
        try? parallel(batches + acting.count, threads: o.threads) { [self] dispatch, _, b in
            if b >= batches {
                _ = try dispatch.call("PUT", "/v1/couriers/me/status", json: ["online": false], token: acting[b - batches].token)
                return
            }
            _ = try seed(batch: b, online: false, on: dispatch)
        }
    }

    /// Creates or updates the `batch`th thousand of the seeded fleet, where they are now.
    private func seed(batch b: Int, online: Bool, on dispatch: API) throws -> API.Reply {
        let couriers: [[String: Any]] = ((b * 1000)..<min(fleet.ids.count, (b + 1) * 1000)).map {
            ["id": fleet.ids[$0], "vehicle": ["foot", "bike", "scooter", "car"][$0 % 4], "capacity": o.capacity, "online": online,
             "lat": fleet.lat[$0], "lon": fleet.lon[$0]]
        }
        return try dispatch.call("POST", "/v1/operator/couriers", json: ["couriers": couriers], token: o.operatorToken)
    }

    // MARK: - Driving

    func drive() {
        let start = Date()
        stats.begin()
        var threads: [Thread] = []
        let running = Locked(0)
        func spawn(_ name: String, _ body: @escaping @Sendable () -> Void) {
            _ = running.increment()
            let t = Thread { body(); running.decrement() }
            t.name = name
            threads.append(t)
        }
        let offers = AcceptQueue()
        // As many accepting the seeded couriers' offers as creating parcels: accepts come at the creation rate, and
        // fewer threads than that fell behind it whenever an accept took longer.
        for t in 0..<o.creators {
            spawn("create-\(t)") { [self] in createParcels(thread: t, start: start) }
            spawn("accept-\(t)") { [self] in acceptSeeded(offers, thread: t) }
        }
        for t in 0..<o.threads { spawn("fix-\(t)") { [self] in sendFixes(thread: t) } }
        spawn("offers") { [self] in watchOffers(offers) }
        for (i, courier) in acting.enumerated() { spawn("courier-\(i)") { [self] in actAsCourier(courier, index: i) } }
        threads.forEach { $0.start() }

        // Progress, until the parcels are all created, then until the offers settle.
        var lastLine = Date.distantPast
        var settledSince: Date?
        var lastAccepted = -1
        while true {
            Thread.sleep(forTimeInterval: 0.25)
            let elapsed = Date().timeIntervalSince(start)
            if !creating.isSet, elapsed >= o.duration, o.parcels == 0 { creating.set() }
            if creating.isSet, createSeconds == 0 { createSeconds = elapsed }
            let created = stats.parcelCount, accepted = stats.acceptedCount
            if Date().timeIntervalSince(lastLine) >= 2 {
                lastLine = Date()
                log(String(format: "[%5.0fs] parcels %d (%.1f/s)  assigned %d  fixes %d (%.0f/s)  errors %d%@", elapsed, created,
                           Double(created) / max(elapsed, 0.001), accepted, stats.fixCount, Double(stats.fixCount) / max(elapsed, 0.001),
                           stats.errorCount, creating.isSet ? "  (settling)" : ""))
            }
            if interrupted.isSet { log("interrupted: checking what was done, then taking the couriers offline"); break }
            guard creating.isSet else { continue }
            // Settled: everything assigned, or nothing new assigned for 5 seconds (couriers full, or none in reach).
            if accepted != lastAccepted { lastAccepted = accepted; settledSince = Date() }
            if accepted >= created || Date().timeIntervalSince(settledSince ?? Date()) > 5 { break }
        }
        stopping.set()
        while running.current > 0 { Thread.sleep(forTimeInterval: 0.05) }
        driveSeconds = Date().timeIntervalSince(start)
    }

    /// Ctrl-C: stop creating and moving now, then check, report and tidy up as after a full run.
    func interrupt() {
        interrupted.set()
        creating.set()
    }

    /// The next parcel's number on the schedule, nil past the `--parcels` limit.
    private func reserve() -> Int? {
        reservedLock.lock(); defer { reservedLock.unlock() }
        if o.parcels > 0 && reserved >= o.parcels { return nil }
        reserved += 1
        return reserved - 1
    }

    /// One parcel was tried (created or refused): under `--parcels`, creating ends with the last of them.
    private func tried() {
        reservedLock.lock(); defer { reservedLock.unlock() }
        finished += 1
        if o.parcels > 0 && finished >= o.parcels { creating.set() }
    }

    /// Creates the parcels the shared schedule gives this thread: each takes the next number n and sends it when it
    /// is due (n / rate seconds after the start), or at once when late.
    private func createParcels(thread: Int, start: Date) {
        let api = API(o.dispatch, start: thread)
        // Past the duration, or interrupted, a number not yet due is not sent; under `--parcels` every number is.
        var over: Bool { interrupted.isSet || (o.parcels == 0 && creating.isSet) }
        while !creating.isSet {
            guard let n = reserve() else { return }
            let due = start.addingTimeInterval(Double(n) / o.parcelRate)
            while !over, due.timeIntervalSinceNow > 0 { Thread.sleep(forTimeInterval: min(due.timeIntervalSinceNow, 0.25)) }
            if over { return }
            let sender = Int.random(in: 0..<senders.count)
            let pickup = area.random(), dropoff = area.random()
            let express = Double.random(in: 0..<1) < o.expressShare
            var body: [String: Any] = [
                "pickup": ["lat": pickup.lat, "lon": pickup.lon, "address": "Pickup, load test"],
                "dropoff": ["lat": dropoff.lat, "lon": dropoff.lon, "address": "Drop-off, load test"],
                "recipient": ["name": "Load Test Recipient"], "service": express ? "express" : "standard",
                "paymentMethod": "cash", "documentPhotoMediaId": senders[sender].photo]
            if Double.random(in: 0..<1) < o.cardShare {
                let authenticate = Double.random(in: 0..<1) < o.authenticationShare
                (body["paymentMethod"], body["cardPaymentMethod"]) = ("card", authenticate ? "pm_card_authenticationRequired" : "pm_card_visa")
            }
            let centre = !centres.isEmpty && Double.random(in: 0..<1) < o.centreShare ? centres.randomElement() : nil
            if let centre { (body["pickup"], body["dropOffCentreId"]) = (nil, centre.id) }
            do {
                let r = try api.call("POST", "/v1/parcels", json: body, token: senders[sender].token)
                if r.status == 201, let id = r["id"] as? String {
                    if let secret = (r["payment"] as? [String: Any])?["clientSecret"] as? String { authenticate(secret) }
                    if let centre {  // the sender brings it, the staff take it in by its code
                        let checked = try api.call("POST", "/v1/centres/\(centre.id)/check-ins", json: ["code": r["centreCode"] as? String ?? ""],
                                                   token: centre.staff)
                        if checked.status != 200 { stats.error(checked.kind("POST", "/v1/centres/{id}/check-ins")) }
                    }
                    stats.created(.init(id: id, sender: sender, pickup: pickup, express: express, second: stats.second), ms: r.ms)
                } else {
                    stats.error(r.kind("POST", "/v1/parcels"))
                }
            } catch {
                stats.error("POST /v1/parcels transport: \(error)")
            }
            tried()
        }
    }

    /// The card's holder completes 3-D Secure on the Stripe stand-in, as the app's SDK would; its webhook then tells
    /// dispatch.
    private func authenticate(_ clientSecret: String) {
        guard let url = URL(string: o.provider + "/_standin/authenticate"),
              let body = try? JSONSerialization.data(withJSONObject: ["client_secret": clientSecret, "outcome": "succeed"]),
              Fetch.send("POST", url, headers: ["Content-Type": "application/json"], body: body, timeout: 10)?.status == 200 else {
            return stats.error("POST /_standin/authenticate")
        }
    }

    /// Moves this thread's slice of the seeded couriers and sends their fixes in batches, at its share of the rate.
    private func sendFixes(thread: Int) {
        let api = API(o.dispatch, start: thread)
        let count = fleet.ids.count
        let lo = count * thread / o.threads, hi = count * (thread + 1) / o.threads
        guard hi > lo else { return }
        let rate = max(0, o.fixRate - Double(acting.count)) / Double(o.threads)
        var cursor = lo
        var owed = 0.0
        var last = Date()
        while !stopping.isSet {
            Thread.sleep(forTimeInterval: 0.1)
            let now = Date()
            owed += rate * now.timeIntervalSince(last)
            last = now
            while owed >= 1 && !stopping.isSet {
                let n = min(Int(owed), 1000)
                owed -= Double(n)
                // The batch's JSON written directly: through JSONSerialization this tool took more of the two
                // cores than dispatch did, and a load tool must not be what the fix rate measures.
                var body = Array(#"{"fixes":["#.utf8)
                body.reserveCapacity(n * 120)
                for i in 0..<n {
                    let p = area.step((fleet.lat[cursor], fleet.lon[cursor]), heading: &fleet.heading[cursor], meters: .random(in: 5...60))
                    fleet.lat[cursor] = p.lat; fleet.lon[cursor] = p.lon
                    if i > 0 { body.append(UInt8(ascii: ",")) }
                    body += #"{"courierId":"\#(fleet.ids[cursor])","lat":\#(p.lat),"lon":\#(p.lon),"heading":\#(fleet.heading[cursor])}"#.utf8
                    cursor = cursor + 1 == hi ? lo : cursor + 1
                }
                body += "]}".utf8
                do {
                    let r = try api.call("POST", "/v1/operator/locations", raw: body, token: o.operatorToken,
                                         headers: ["Content-Type": "application/json"])
                    if r.status == 200 { stats.batch(ms: r.ms, sent: n, applied: r["applied"] as? Int ?? 0) }
                    else { stats.error(r.kind("POST", "/v1/operator/locations")) }
                } catch {
                    stats.error("POST /v1/operator/locations transport: \(error)")
                }
            }
        }
    }

    /// Lists open offers for the seeded couriers and queues them to be accepted.
    private func watchOffers(_ queue: AcceptQueue) {
        let api = API(o.dispatch)
        var queued: Set<String> = []
        while !stopping.isSet {
            do {
                let r = try api.call("GET", "/v1/operator/offers?limit=1000", token: o.operatorToken)
                guard r.status == 200 else { stats.error(r.kind("GET", "/v1/operator/offers")); Thread.sleep(forTimeInterval: 0.5); continue }
                for item in r["items"] as? [[String: Any]] ?? [] {
                    guard let parcel = item["parcelId"] as? String, let courier = item["courierId"] as? String, seeded.contains(courier),
                          queued.insert(parcel + courier).inserted else { continue }
                    queue.push((parcel, courier))
                }
            } catch {
                stats.error("GET /v1/operator/offers transport: \(error)")
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
        queue.close()
    }

    private func acceptSeeded(_ queue: AcceptQueue, thread: Int) {
        let api = API(o.dispatch, start: thread)
        while let (parcel, courier) = queue.pop() {
            do {
                let r = try api.call("POST", "/v1/operator/parcels/\(parcel)/accept", json: ["courierId": courier], token: o.operatorToken)
                if r.status == 200 { stats.accept(parcel, by: courier, ms: r.ms) }
                else { stats.error(r.kind("POST", "/v1/operator/parcels/{id}/accept")) }
            } catch {
                stats.error("POST /v1/operator/parcels/{id}/accept transport: \(error)")
            }
        }
    }

    /// A signed-up courier: a fix a second with their own token, and their own offers accepted (and, with
    /// `--deliver`, picked up and delivered at once).
    private func actAsCourier(_ me: (id: String, token: String, photo: String), index: Int) {
        let api = API(o.dispatch, start: index)
        var position = starts.current[me.id] ?? area.random(), heading = Double.random(in: 0..<360)
        var nextFix = Date()
        while !stopping.isSet {
            do {
                if Date() >= nextFix {
                    nextFix = nextFix.addingTimeInterval(1)
                    position = area.step(position, heading: &heading, meters: .random(in: 5...60))
                    let r = try api.call("PUT", "/v1/couriers/me/location", json: ["lat": position.lat, "lon": position.lon, "heading": heading],
                                         token: me.token)
                    if r.status == 200 { stats.fix(ms: r.ms, applied: r["applied"] as? Bool == true) }
                    else { stats.error(r.kind("PUT", "/v1/couriers/me/location")) }
                }
                let offers = try api.call("GET", "/v1/parcels?role=courier&status=offered&limit=100", token: me.token)
                for item in offers["items"] as? [[String: Any]] ?? [] {
                    guard let id = item["id"] as? String else { continue }
                    let r = try api.call("POST", "/v1/parcels/\(id)/accept", token: me.token)
                    guard r.status == 200 else { stats.error(r.kind("POST", "/v1/parcels/{id}/accept")); continue }
                    stats.accept(id, by: me.id, ms: r.ms)
                    guard o.deliver else { continue }
                    for (action, body) in [("pickup", nil), ("deliver", ["photoMediaId": me.photo])] as [(String, [String: Any]?)] {
                        let r = try api.call("POST", "/v1/parcels/\(id)/\(action)", json: body, token: me.token)
                        guard r.status == 200 else { stats.error(r.kind("POST", "/v1/parcels/{id}/\(action)")); break }
                    }
                }
            } catch {
                stats.error("courier transport: \(error)")
            }
            Thread.sleep(forTimeInterval: 0.1)
        }
    }
}

// MARK: - Small thread-safe helpers

/// A value shared by threads.
///
/// `@unchecked Sendable`: guarded by `lock`.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func with<R>(_ body: (inout Value) -> R) -> R { lock.lock(); defer { lock.unlock() }; return body(&value) }
    var current: Value { with { $0 } }
}

extension Locked where Value == Bool {
    /// A flag the threads poll.
    var isSet: Bool { current }
    func set() { with { $0 = true } }
}

extension Locked where Value == Int {
    /// Adds one; returns the value before.
    func increment() -> Int { with { n in defer { n += 1 }; return n } }
    func decrement() { with { $0 -= 1 } }
}

/// Offers waiting to be accepted.
///
/// `@unchecked Sendable`: guarded by `condition`.
final class AcceptQueue: @unchecked Sendable {
    private let condition = NSCondition()
    private var items: [(String, String)] = []
    private var closed = false
    func push(_ item: (String, String)) { condition.lock(); items.append(item); condition.signal(); condition.unlock() }
    func close() { condition.lock(); closed = true; condition.broadcast(); condition.unlock() }
    func pop() -> (String, String)? {
        condition.lock(); defer { condition.unlock() }
        while items.isEmpty && !closed { condition.wait() }
        return items.isEmpty ? nil : items.removeFirst()
    }
}
