import Foundation
@testable import DispatchCore
@testable import Events
@testable import HTTP
import Models
import Web
import XCTest

/// A parcel's live stream without a broker: the snapshot comes first whatever the feed brought while it was read.
final class ParcelWatchTests: XCTestCase {
    let parcel = UUID(), courier = UUID()

    func status(_ from: ParcelStatus, _ to: ParcelStatus) -> LiveFeed.Item {
        let change = ParcelStatusChanged(parcelId: parcel, from: from, to: to, actor: .courier, actorId: courier, courierId: courier,
                                         place: nil, at: Date())
        let data = String(decoding: try! JSON.encode(change), as: UTF8.self)
        return LiveFeed.Item(id: UUID().uuidString, event: "status", data: data, time: Date(),
                             frame: EventStream.frame(event: "status", data: data))
    }

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

    func watch(_ stream: EventStream) -> ParcelWatch {
        ParcelWatch(stream: stream, send: { $1.send(frame: $0.frame) }, opened: { _ in })
    }

    func testTheSnapshotComesFirstAndTransitionsItAlreadyShowsAreNotRepeated() {
        let stream = EventStream(), watch = watch(stream)
        // Both committed while the parcel was read; the read saw the first.
        watch.deliver(status(.offered, .assigned))
        watch.deliver(status(.assigned, .pickedUp))
        watch.open(snapshot: "{}", status: .assigned, courier: courier.lowercased, viewer: courier.lowercased, isParty: false)
        watch.deliver(status(.pickedUp, .inTransit))
        XCTAssertEqual(received(stream), ["snapshot", "status picked_up", "status in_transit"])
    }

    func testWhatArrivedBeforeASnapshotThatShowsNoneOfItIsSentAfterIt() {
        let stream = EventStream(), watch = watch(stream)
        watch.deliver(status(.assigned, .pickedUp))
        watch.open(snapshot: "{}", status: .assigned, courier: courier.lowercased, viewer: UUID().lowercased, isParty: true)
        XCTAssertEqual(received(stream), ["snapshot", "status picked_up"])
    }

    func testAFinalSnapshotEndsTheStreamAndAHeldDeclineEndsACouriersAfterIt() {
        let finished = EventStream(), done = watch(finished)
        done.deliver(status(.delivered, .received))
        done.open(snapshot: "{}", status: .received, courier: nil, viewer: courier.lowercased, isParty: true)
        XCTAssertEqual(received(finished), ["snapshot", "end"])

        let declined = EventStream(), offer = watch(declined)
        offer.deliver(status(.offered, .awaitingCourier))
        offer.open(snapshot: "{}", status: .offered, courier: courier.lowercased, viewer: courier.lowercased, isParty: false)
        XCTAssertEqual(received(declined), ["snapshot", "status awaiting_courier", "end"])
        XCTAssertTrue(declined.isClosed)
    }
}
