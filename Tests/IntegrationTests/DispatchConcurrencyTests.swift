import Foundation
import HTTP
import XCTest

/// Two dispatch processes on one database, 50 couriers and 500 parcels created in parallel: no parcel is held by two
/// couriers, no courier carries more than its capacity, and every parcel ends assigned or waiting.
final class DispatchConcurrencyTests: DispatchTestCase {
    func testTwoInstancesFiftyCouriersFiveHundredParcels() throws {
        let second = try startInstance()
        defer { second.stop() }
        let ports = [service.port, second.port]

        // 50 couriers in a 4 km square, capacity 2: room for 100 of the 500 parcels.
        var couriers: [Person] = []
        for i in 0..<50 {
            couriers.append(try courier(lat: 44.41 + Double(i % 10) * 0.004, lon: 26.08 + Double(i / 10) * 0.006, capacity: 2))
        }
        let senders = try (0..<5).map { _ in try person() }
        let photos = try senders.map { try photo($0) }

        // Couriers accept whatever they are offered, on both instances, while parcels pour in.
        let stop = LockedBox<Bool>()
        let accepted = LockedBox<Int>()
        accepted.set(0)
        let acceptors = couriers.enumerated().map { index, c in
            Thread {
                let client = APIClient(port: ports[index % 2])
                while stop.get() != true {
                    guard let page = try? client.get("/v1/parcels?role=courier&status=offered", token: c.token) else { continue }
                    for item in page["items"] as? [[String: Any]] ?? [] {
                        if let id = item["id"] as? String, (try? client.post("/v1/parcels/\(id)/accept", token: c.token))?.status == 200 {
                            accepted.update { $0 = ($0 ?? 0) + 1 }
                        }
                    }
                    Thread.sleep(forTimeInterval: 0.05)
                }
            }
        }
        acceptors.forEach { $0.start() }
        let created = LockedBox<Int>()
        created.set(0)
        let creators = (0..<10).map { t in
            Thread {
                let client = APIClient(port: ports[t % 2])
                for i in 0..<50 {
                    let s = (t + i) % 5
                    let body: [String: Any] = [
                        "pickup": ["lat": 44.41 + Double(i % 9) * 0.004, "lon": 26.08 + Double(t % 6) * 0.005, "address": "P\(t)-\(i)"],
                        "dropoff": ["lat": 44.45, "lon": 26.10, "address": "D"], "recipient": ["name": "R"],
                        "service": i % 3 == 0 ? "express" : "standard", "paymentMethod": "cash", "documentPhotoMediaId": photos[s]]
                    if (try? client.post("/v1/parcels", body, token: senders[s].token))?.status == 201 {
                        created.update { $0 = ($0 ?? 0) + 1 }
                    }
                }
            }
        }
        creators.forEach { $0.start() }
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 120) { created.get() == 500 }, "created \(created.get() ?? 0)")
        // Every courier fills up: 100 assignments.
        let filled = TestEnvironment.waitUntil(timeout: 60) { (try? self.count("parcels", "status = 'assigned'")) == 100 }
        XCTAssertTrue(filled, "assigned: \((try? count("parcels", "status = 'assigned'")) ?? -1)")
        if !filled {
            for row in try database.connect().rows("""
                SELECT user_id::text || ' ' || active || '/' || capacity || ' online=' || online || ' at ' || lat || ',' || lon
                       || ' offers=' || (SELECT count(*) FROM dispatch.parcels WHERE offered_to = user_id AND status = 'offered')
                       || ' declined=' || (SELECT count(*) FROM dispatch.parcel_declines WHERE courier_id = user_id) AS x
                FROM dispatch.couriers WHERE active < capacity
                """) { print("courier with room:", try row["x", as: String.self]) }
        }
        stop.set(true)
        // Open offers expire back to waiting: nobody has room left.
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 30) { (try? self.count("parcels", "status = 'offered'")) == 0 })

        let db = try database.connect()
        XCTAssertEqual(try count("parcels"), 500)
        XCTAssertEqual(try count("parcels", "status NOT IN ('assigned', 'awaiting_courier')"), 0, "every parcel assigned or waiting")
        XCTAssertEqual(try db.first("""
            SELECT count(*) AS n FROM dispatch.couriers c
            WHERE c.active <> (SELECT count(*) FROM dispatch.parcels p WHERE p.courier_id = c.user_id AND p.status = 'assigned')
               OR c.active > c.capacity
            """)!["n", as: Int.self], 0, "each courier's load matches its parcels and stays within capacity")
        XCTAssertEqual(try db.first("""
            SELECT count(*) AS n FROM (SELECT parcel_id FROM dispatch.parcel_history WHERE to_status = 'assigned'
                                       GROUP BY parcel_id HAVING count(*) > 1) twice
            """)!["n", as: Int.self], 0, "no parcel was assigned twice")
        XCTAssertEqual(accepted.get(), 100, "every successful accept is one of the 100 assignments")
    }
}
