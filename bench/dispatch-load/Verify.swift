import Foundation
import Models
import HTTP
import Postgres

extension Run {
    /// Reads every parcel back as its sender, measures the dispatch latencies on the service's clock, and checks
    /// the invariants from the API and (given its URL) the database.
    func verify() throws -> Report {
        let parcels = stats.with { $0.parcels }
        let ids = Set(parcels.map(\.id))
        let accepted = stats.with { $0.accepted }.filter { ids.contains($0.key) }  // older runs' parcels may be offered too
        log("checking \(parcels.count) parcels through the API")
        let views = Locked([[String: Any]?](repeating: nil, count: parcels.count))
        try parallel(parcels.count, threads: o.threads) { [self] dispatch, _, i in
            let r = try dispatch.call("GET", "/v1/parcels/\(parcels[i].id)", token: senders[parcels[i].sender].token)
            let view = r.status == 200 ? r.json : nil
            views.with { $0[i] = view }
        }
        let all = views.current
        var offeredMs: [Double] = [], assignedMs: [Double] = []
        var statuses: [String: Int] = [:]
        var unreadable = 0, twice = 0, wrongCourier = 0, elsewhere = 0
        var rows: [Report.ParcelRow] = []
        var dispatchMs: [Int: [String: [Double]]] = [:]  // second created → offered and assigned latencies
        // Where an accepted parcel may be: delivered too, when the run's couriers deliver.
        let carried: Set<String> = o.deliver ? ["assigned", "picked_up", "in_transit", "delivered"] : ["assigned"]
        for (i, p) in parcels.enumerated() {
            guard let view = all[i] else { unreadable += 1; continue }
            let status = view["status"] as? String ?? "?"
            statuses[status, default: 0] += 1
            let history = view["history"] as? [[String: Any]] ?? []
            func at(_ to: String) -> Date? { (history.first { $0["to"] as? String == to }?["at"] as? String).flatMap(Timestamp.parse) }
            let created = at("awaiting_courier")
            let offered = at("offered").flatMap { o in created.map { o.timeIntervalSince($0) * 1000 } }
            let assigned = at("assigned").flatMap { a in created.map { a.timeIntervalSince($0) * 1000 } }
            if let offered { offeredMs.append(offered); dispatchMs[p.second, default: [:]]["offered", default: []].append(offered) }
            if let assigned { assignedMs.append(assigned); dispatchMs[p.second, default: [:]]["assigned", default: []].append(assigned) }
            let assignments = history.filter { $0["to"] as? String == "assigned" }.count
            let acceptors = accepted[p.id] ?? []
            if assignments > 1 || acceptors.count > 1 { twice += 1 }
            if !acceptors.isEmpty, acceptors.count != 1 || view["courierId"] as? String != acceptors.first || !carried.contains(status) {
                wrongCourier += 1
            }
            if acceptors.isEmpty && status == "assigned" { elsewhere += 1 }  // another client's courier took it
            rows.append(.init(id: p.id, lat: p.pickup.lat, lon: p.pickup.lon, express: p.express, status: status,
                              offeredMs: offered, assignedMs: assigned))
        }
        let allowed = carried.union(["awaiting_payment", "awaiting_drop_off", "awaiting_courier", "offered"])
        let odd = statuses.filter { !allowed.contains($0.key) }.values.reduce(0, +)
        let statusText = statuses.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
        var invariants: [Report.Invariant] = [
            .init(name: "every parcel accounted for (API)", ok: unreadable == 0 && odd == 0,
                  detail: "\(parcels.count) created; \(parcels.count - unreadable) read back by their senders: \(statusText.isEmpty ? "none" : statusText)"),
            .init(name: "no parcel assigned twice (API)", ok: twice == 0, detail: "\(twice) parcels with more than one assignment"),
            .init(name: "assigned parcels held by the courier who accepted them (API)", ok: wrongCourier == 0,
                  detail: "\(wrongCourier) mismatches among \(accepted.count) accepted"
                    + (elsewhere > 0 ? "; \(elsewhere) taken by couriers outside this run (another client?)" : "")),
        ]
        if o.databaseURL.isEmpty {
            invariants.append(.init(name: "database checks", ok: true, detail: "skipped: no --database-url"))
        } else {
            log("checking the database")
            invariants += try databaseChecks(created: parcels.count)
        }
        let sample = stride(from: 0, to: fleet.ids.count, by: max(1, fleet.ids.count / 3000)).map { [fleet.lat[$0], fleet.lon[$0]] }
        // The series: each second's round trips, and the dispatch latencies of the parcels created in it.
        let buckets = stats.with { $0.seconds }
        let last = max(buckets.keys.max() ?? 0, dispatchMs.keys.max() ?? 0)
        let series = (0...last).map { t -> SecondOfRun in
            let b = buckets[t] ?? .init()
            let all = b.ms.merging(dispatchMs[t] ?? [:]) { $0 + $1 }
            return SecondOfRun(t: t, created: b.created, assigned: b.assigned, fixes: b.fixes, errors: b.errors,
                               latencyMs: all.mapValues { SecondOfRun.Percentiles(Distribution($0)) })
        }
        let elapsed = max(createSeconds, 0.001)
        return Report(
            startedAt: Timestamp.format(Date().addingTimeInterval(-driveSeconds)),
            settings: ["dispatch": o.dispatch, "couriers": "\(o.couriers)", "actingCouriers": "\(o.actingCouriers)",
                       "capacity": "\(o.capacity)", "fixRate": "\(o.fixRate)", "parcelRate": "\(o.parcelRate)",
                       "duration": "\(o.duration)", "parcels": "\(o.parcels)", "areaKm": "\(o.areaKm)",
                       "center": "\(o.center.lat),\(o.center.lon)", "senders": "\(o.senders)", "creators": "\(o.creators)", "threads": "\(o.threads)",
                       "cardShare": "\(o.cardShare)", "centreShare": "\(o.centreShare)", "deliver": "\(o.deliver)"],
            setupSeconds: setupSeconds, createSeconds: createSeconds, driveSeconds: driveSeconds,
            parcelsCreated: parcels.count, parcelsAssigned: statuses["assigned"] ?? 0,
            parcelsPerSecond: Double(parcels.count) / elapsed, assignedPerSecond: Double(assignedMs.count) / elapsed,
            fixesSent: stats.with { $0.fixesSent }, fixesApplied: stats.with { $0.fixesApplied },
            fixesPerSecond: Double(stats.fixCount) / max(driveSeconds, 0.001),
            dispatchOfferedMs: Distribution(offeredMs), dispatchAssignedMs: Distribution(assignedMs),
            createMs: Distribution(stats.with { $0.createMs }), courierFixMs: Distribution(stats.with { $0.fixMs }),
            fleetBatchMs: Distribution(stats.with { $0.batchMs }), acceptMs: Distribution(stats.with { $0.acceptMs }),
            errors: stats.with { $0.errors }, invariants: invariants, parcels: rows, couriersSample: sample, series: series,
            thresholds: [])
    }

    private func databaseChecks(created: Int) throws -> [Report.Invariant] {
        let c = try Connection(url: o.databaseURL)
        func count(_ sql: String, _ parameters: [(any PostgresEncodable)?] = []) throws -> Int {
            try c.first(sql, parameters)?["n"] ?? -1
        }
        let over = try count("SELECT count(*) AS n FROM dispatch.couriers WHERE active > capacity")
        let loads = try count("""
            SELECT count(*) AS n FROM dispatch.couriers c WHERE active <> (SELECT count(*) FROM dispatch.parcels p
                WHERE p.courier_id = c.user_id AND p.status IN ('assigned', 'picked_up', 'in_transit'))
            """)
        let offers = try count("""
            SELECT count(*) AS n FROM (SELECT offered_to FROM dispatch.parcels WHERE status = 'offered'
                GROUP BY offered_to HAVING count(*) > 1) x
            """)
        let stored = try count("SELECT count(*) AS n FROM dispatch.parcels WHERE sender_id = ANY($1::uuid[])",
                               [PostgresArray(senders.map(\.id))])
        let doubly = try count("""
            SELECT count(*) AS n FROM (SELECT parcel_id FROM dispatch.parcel_history h JOIN dispatch.parcels p ON p.id = h.parcel_id
                WHERE h.to_status = 'assigned' AND p.sender_id = ANY($1::uuid[]) GROUP BY parcel_id HAVING count(*) > 1) x
            """, [PostgresArray(senders.map(\.id))])
        return [
            .init(name: "no courier over capacity (database)", ok: over == 0, detail: "\(over) couriers carry more than they can"),
            .init(name: "couriers' loads match the parcels they hold (database)", ok: loads == 0, detail: "\(loads) couriers differ"),
            .init(name: "at most one open offer per courier (database)", ok: offers == 0, detail: "\(offers) couriers with several"),
            .init(name: "no parcel assigned twice (database history)", ok: doubly == 0, detail: "\(doubly) parcels"),
            .init(name: "every parcel accounted for (database)", ok: stored == created,
                  detail: "\(stored) stored for this run's senders, \(created) created"),
        ] + (try paymentChecks(c)) + (try centreChecks(c))
    }

    /// Parcels brought to a centre: none offered before the centre's staff took it in.
    private func centreChecks(_ c: Connection) throws -> [Report.Invariant] {
        guard o.centreShare > 0 else { return [] }
        let senderIds = PostgresArray(senders.map(\.id))
        let row = try c.first("""
            SELECT count(*)::int AS n,
                count(*) FILTER (WHERE EXISTS (SELECT 1 FROM dispatch.parcel_history h WHERE h.parcel_id = p.id AND h.to_status = 'offered')
                    AND NOT EXISTS (SELECT 1 FROM dispatch.parcel_history h WHERE h.parcel_id = p.id AND h.actor = 'staff'
                                    AND h.to_status = 'awaiting_courier'))::int AS early
            FROM dispatch.parcels p WHERE p.drop_off_centre_id IS NOT NULL AND p.sender_id = ANY($1::uuid[])
            """, [senderIds])
        let n: Int = try row?["n"] ?? 0, early: Int = try row?["early"] ?? -1
        return [.init(name: "no centre parcel offered before its check-in (database)", ok: early == 0,
                      detail: "\(early) of \(n) parcels brought to centres")]
    }

    /// Card parcels: none sought a courier before its card was held, and (from the provider's side) no card held or
    /// charged twice, and every capture one the ledger knows.
    private func paymentChecks(_ c: Connection) throws -> [Report.Invariant] {
        let senderIds = PostgresArray(senders.map(\.id))
        let cards: Int = try c.first("""
            SELECT count(*) AS n FROM dispatch.parcels WHERE payment_method = 'card' AND sender_id = ANY($1::uuid[])
            """, [senderIds])?["n"] ?? 0
        guard cards > 0 else { return [] }
        let unheld: Int = try c.first("""
            SELECT count(*) AS n FROM dispatch.parcels p JOIN dispatch.payments m ON m.parcel_id = p.id
            WHERE p.payment_method = 'card' AND p.sender_id = ANY($1::uuid[])
              AND EXISTS (SELECT 1 FROM dispatch.parcel_history h WHERE h.parcel_id = p.id AND h.to_status = 'awaiting_courier')
              AND NOT EXISTS (SELECT 1 FROM dispatch.payment_ledger l WHERE l.payment_id = m.id AND l.entry = 'authorised')
            """, [senderIds])?["n"] ?? -1
        let payments: [String] = try c.rows("""
            SELECT m.id::text AS id FROM dispatch.payments m JOIN dispatch.parcels p ON p.id = m.parcel_id
            WHERE m.method = 'card' AND p.sender_id = ANY($1::uuid[])
            """, [senderIds]).map { try $0["id"] }
        var checks: [Report.Invariant] = [
            .init(name: "no card parcel sought a courier before its card was held (database)", ok: unheld == 0,
                  detail: "\(unheld) of \(cards) card parcels"),
        ]
        // First, so that the provider is asked once the last captures are made.
        if o.deliver { checks.append(try deliveredCardsCaptured(c, payments)) }
        guard !o.provider.isEmpty, let url = URL(string: o.provider + "/_standin/intents"),
              let (status, body) = Fetch.get(url, timeout: 30), status == 200,
              let seen = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] else {
            checks.append(.init(name: "no card held or charged twice (provider)", ok: o.provider.isEmpty,
                                detail: o.provider.isEmpty ? "skipped: no --provider" : "the provider at \(o.provider) did not answer"))
            return checks
        }
        let mine = Set(payments)
        var holds: [String: Int] = [:], intentOf: [String: String] = [:]
        for intent in seen["intents"] as? [[String: Any]] ?? [] {
            guard let payment = (intent["metadata"] as? [String: Any])?["payment_id"] as? String, mine.contains(payment) else { continue }
            holds[payment, default: 0] += 1
            intentOf[intent["id"] as? String ?? ""] = payment
        }
        var captures: [String: Int] = [:]
        for action in seen["actions"] as? [[String]] ?? [] where action.first == "capture" {
            if let payment = intentOf[action.last ?? ""] { captures[payment, default: 0] += 1 }
        }
        let heldTwice = holds.values.filter { $0 > 1 }.count, chargedTwice = captures.values.filter { $0 > 1 }.count
        let ledgerCaptures: Int = try c.first("""
            SELECT count(*) AS n FROM dispatch.payment_ledger WHERE entry = 'captured' AND payment_id = ANY($1::uuid[])
            """, [PostgresArray(payments)])?["n"] ?? -1
        checks.append(.init(name: "no card held or charged twice (provider)", ok: heldTwice == 0 && chargedTwice == 0,
                            detail: "\(holds.count) of \(cards) cards held, \(heldTwice) twice; \(captures.count) charged, \(chargedTwice) twice"))
        checks.append(.init(name: "captured at the provider equals captured in the ledger", ok: ledgerCaptures == captures.count,
                            detail: "\(captures.count) at the provider, \(ledgerCaptures) in the ledger"))
        // The stand-in sends webhooks when it is given an endpoint (the local stack's gateway): each taken.
        let webhooks = (seen["webhooks"] as? [[Any]] ?? []).filter { intentOf[$0[1] as? String ?? ""] != nil }
        if !webhooks.isEmpty {
            let refused = webhooks.filter { !(200..<300).contains($0[2] as? Int ?? 0) }.count
            checks.append(.init(name: "every webhook the provider sent was taken (provider)", ok: refused == 0,
                                detail: "\(webhooks.count) sent, \(refused) not taken"))
        }
        return checks
    }

    /// Every delivered card parcel's card captured, once (given the settler up to 15 s to take the last ones).
    private func deliveredCardsCaptured(_ c: Connection, _ payments: [String]) throws -> Report.Invariant {
        var delivered = 0, captured = -1
        let deadline = Date().addingTimeInterval(15)
        repeat {
            let row = try c.first("""
                SELECT count(*) FILTER (WHERE EXISTS (SELECT 1 FROM dispatch.parcel_history h WHERE h.parcel_id = m.parcel_id
                                                      AND h.to_status = 'delivered'))::int AS delivered,
                    (SELECT count(*) FROM dispatch.payment_ledger l WHERE l.entry = 'captured' AND l.payment_id = ANY($1::uuid[]))::int AS captured
                FROM dispatch.payments m WHERE m.id = ANY($1::uuid[])
                """, [PostgresArray(payments)])
            delivered = try row?["delivered"] ?? 0
            captured = try row?["captured"] ?? -1
            if delivered == captured { break }
            Thread.sleep(forTimeInterval: 0.5)
        } while Date() < deadline
        return .init(name: "captured equals delivered card parcels (database)", ok: delivered == captured,
                     detail: "\(delivered) card parcels delivered, \(captured) captured")
    }
}
