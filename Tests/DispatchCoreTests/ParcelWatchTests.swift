import Foundation
@testable import DispatchCore
@testable import Events
@testable import HTTP
import Models
import Synchronization
import Web
import XCTest

/// A parcel's live stream without a broker: the snapshot comes first whatever the feed brought while it was read, and
/// what the snapshot shows already is not sent again.
final class ParcelWatchTests: XCTestCase {
    let parcel = UUID(), courier = UUID(), other = UUID()
    let start = Date(timeIntervalSince1970: 1_800_000_000)

    /// The `n`th transition's event (a second apart), naming `by` as its courier.
    func status(_ from: ParcelStatus, _ to: ParcelStatus, _ n: Int, by: UUID? = nil) -> LiveFeed.Item {
        let change = ParcelStatusChanged(parcelId: parcel, from: from, to: to, actor: .system, actorId: nil, courierId: by ?? courier,
                                         place: nil, at: at(n))
        let data = String(decoding: try! JSON.encode(change), as: UTF8.self)
        return LiveFeed.Item(id: UUID().uuidString, event: "status", data: data, time: Date(),
                             frame: EventStream.frame(event: "status", data: data))
    }

    func at(_ n: Int) -> Date { start.addingTimeInterval(Double(n) + 0.000_4) }  // a history row's microseconds

    /// What a client read: each event's name, and a status's `to`.
    func received(_ stream: EventStream) -> [String] {
        let text = String(decoding: stream.take().bytes, as: UTF8.self)
        return text.components(separatedBy: "\n\n").filter { !$0.isEmpty }.map { frame in
            let lines = frame.split(separator: "\n")
            let event = lines.first { $0.hasPrefix("event: ") }.map { String($0.dropFirst(7)) } ?? ""
            let data = lines.first { $0.hasPrefix("data: ") }.map { String($0.dropFirst(6)) } ?? ""
            let to = (try? JSONSerialization.jsonObject(with: Data(data.utf8)) as? [String: Any])?["to"] as? String
            return to.map { "\(event) \($0)" } ?? event
        }
    }

    /// Whose positions the parcel's streams were told to follow.
    final class Followed: Sendable { let couriers = Mutex<[String?]>([]) }
    let followed = Followed()

    func watch(_ stream: EventStream) -> ParcelWatch {
        ParcelWatch(stream: stream, send: { $1.send(frame: $0.frame) }, follow: { [followed] c in followed.couriers.withLock { $0.append(c) } })
    }

    func testTheSnapshotComesFirstAndTransitionsItAlreadyShowsAreNotRepeated() {
        let stream = EventStream(), watch = watch(stream)
        // Both arrived while the parcel was read; the read saw the first.
        watch.deliver(status(.offered, .assigned, 1))
        watch.deliver(status(.assigned, .pickedUp, 2))
        watch.open(snapshot: "{}", status: .assigned, shownThrough: at(1), courier: courier.lowercased, viewer: courier.lowercased, isParty: false)
        watch.deliver(status(.pickedUp, .inTransit, 3))
        XCTAssertEqual(received(stream), ["snapshot", "status picked_up", "status in_transit"])
        XCTAssertEqual(followed.couriers.withLock { $0 }, [], "the feed follows the courier the held transitions named")
    }

    func testAStatusThatComesBackIsToldByItsTimeNotItsName() {
        let stream = EventStream(), watch = watch(stream)
        // Read while offered to one courier; meanwhile they declined and another was offered it.
        watch.deliver(status(.offered, .awaitingCourier, 2))
        watch.deliver(status(.awaitingCourier, .offered, 3, by: other))
        watch.open(snapshot: "{}", status: .offered, shownThrough: at(1), courier: courier.lowercased, viewer: UUID().lowercased, isParty: true)
        XCTAssertEqual(received(stream), ["snapshot", "status awaiting_courier", "status offered"])
    }

    func testWithNothingHeldTheSnapshotsCourierIsFollowed() {
        let stream = EventStream(), watch = watch(stream)
        watch.open(snapshot: "{}", status: .assigned, shownThrough: at(1), courier: courier.lowercased, viewer: UUID().lowercased, isParty: true)
        XCTAssertEqual(received(stream), ["snapshot"])
        XCTAssertEqual(followed.couriers.withLock { $0 }, [courier.lowercased])
    }

    func testAFinalSnapshotEndsTheStreamAndAHeldDeclineEndsACouriersAfterIt() {
        let finished = EventStream(), done = watch(finished)
        done.deliver(status(.delivered, .received, 5))
        done.open(snapshot: "{}", status: .received, shownThrough: at(5), courier: nil, viewer: courier.lowercased, isParty: true)
        XCTAssertEqual(received(finished), ["snapshot", "end"])

        let declined = EventStream(), offer = watch(declined)
        offer.deliver(status(.offered, .awaitingCourier, 2))
        offer.open(snapshot: "{}", status: .offered, shownThrough: at(1), courier: courier.lowercased, viewer: courier.lowercased, isParty: false)
        XCTAssertEqual(received(declined), ["snapshot", "status awaiting_courier", "end"])
        XCTAssertTrue(declined.isClosed)
    }
}
