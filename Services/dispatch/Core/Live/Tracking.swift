import Events
import Foundation
import HTTP
import Models
import ServiceKit
import Synchronization
import Web

/// Live tracking: every instance reads `parcel.status` and `courier.location` from now on (a kit `LiveFeed`) and
/// forwards them to the event streams its clients hold, so a watcher sees every transition whichever instance
/// made it, and the positions of the parcel's courier. Feed keys are parcel ids; a position goes to the parcels
/// watched here whose courier sent it, found through a dictionary; every event also goes to the operators' maps.
final class ParcelTracking: Sendable {
    /// Which courier carries each parcel watched on this instance, and the reverse.
    private final class Carriers: Sendable {
        private struct State {
            var watchers: [String: Int] = [:]       // parcel → open streams
            var courierOf: [String: String] = [:]   // parcel → courier
            var parcelsOf: [String: Set<String>] = [:]  // courier → parcels
        }
        private let state = Mutex(State())

        func watch(_ parcel: String) {
            state.withLock { $0.watchers[parcel, default: 0] += 1 }
        }

        func unwatch(_ parcel: String) {
            state.withLock { s in
                s.watchers[parcel, default: 1] -= 1
                guard s.watchers[parcel] == 0 else { return }
                s.watchers[parcel] = nil
                if let courier = s.courierOf.removeValue(forKey: parcel) { Self.drop(&s, parcel, from: courier) }
            }
        }

        /// Who carries the parcel now (or is offered it; nil: nobody), remembered only while someone here watches it.
        func carried(_ parcel: String, by courier: String?) {
            state.withLock { s in
                guard s.watchers[parcel] != nil else { return }
                if let courier {
                    Self.assign(&s, parcel, courier)
                } else if let old = s.courierOf.removeValue(forKey: parcel) {
                    Self.drop(&s, parcel, from: old)
                }
            }
        }

        func parcels(of courier: String) -> [String] { state.withLock { Array($0.parcelsOf[courier] ?? []) } }

        private static func assign(_ s: inout State, _ parcel: String, _ courier: String) {
            if let old = s.courierOf[parcel], old != courier { drop(&s, parcel, from: old) }
            s.courierOf[parcel] = courier
            s.parcelsOf[courier, default: []].insert(parcel)
        }

        private static func drop(_ s: inout State, _ parcel: String, from courier: String) {
            s.parcelsOf[courier]?.remove(parcel)
            if s.parcelsOf[courier]?.isEmpty == true { s.parcelsOf[courier] = nil }
        }
    }

    private let carriers: Carriers
    private let relay: OutboxRelay
    /// The feed the app runs.
    let feed: LiveFeed

    /// Reads through `app`'s Kafka settings once its topics exist; publishes positions through its relay's producer.
    init(_ app: ServiceApp) {
        let carriers = Carriers()
        self.carriers = carriers
        relay = app.relay
        feed = LiveFeed(name: "parcel-tracking", topics: [ParcelStatusChanged.type, CourierLocation.type], start: .end,
                        kafka: app.kafka, topicsReady: app.topicsReady, logger: app.logger) { event in
            switch event.type {
            case ParcelStatusChanged.type:
                guard let change = try? event.decode(ParcelStatusChanged.self) else { return nil }
                let parcel = change.parcelId.lowercased
                // Back to waiting (declined, expired, withdrawn), the event names the courier who no longer has it.
                carriers.carried(parcel, by: change.to == .awaitingCourier ? nil : change.courierId?.lowercased)
                return .init(keys: [parcel, Self.fleetKey], event: "status")
            case CourierLocation.type:
                guard let fix = try? event.decode(CourierLocation.self) else { return nil }
                return .init(keys: carriers.parcels(of: fix.courierId.lowercased) + [Self.fleetKey], event: "position")
            default:
                return nil
            }
        }
    }

    /// The key the operator's map watches: every transition and every position.
    static let fleetKey = "fleet"

    /// Streams every transition and position to an operator's map.
    func watchFleet(stream: EventStream) {
        feed.watch(Self.fleetKey, stream: stream)
    }

    /// Whether the topics are being read (from where they ended when reading began).
    var isReading: Bool { feed.isReading }

    /// Publishes a courier's fix for the watchers of their parcels (not through the outbox: positions are ephemeral).
    func publishPosition(_ location: CourierLocation) {
        relay.publishEphemeral(location, subject: location.courierId.lowercased, source: "/dispatch", at: Timestamp.format(location.at))
    }

    /// Starts following a parcel for `stream`: what the feed brings from now on is held until the watch is opened
    /// with the snapshot, so that the snapshot comes first and nothing committed after the parcel was read is missed.
    func watch(parcel: String, stream: EventStream) -> ParcelWatch {
        carriers.watch(parcel)
        stream.onClose { [carriers] in carriers.unwatch(parcel) }
        let watch = ParcelWatch(stream: stream, send: feed.send) { [carriers] courier in carriers.carried(parcel, by: courier) }
        feed.watch(parcel, until: stream, deliver: watch.deliver)
        return watch
    }
}

/// One stream of one parcel: its snapshot, then its transitions and its courier's positions. The stream ends after a
/// final status, and for a courier when the parcel is no longer theirs (an offer declined or expired, a parcel
/// withdrawn); a sender or recipient (`isParty`) keeps it to the end.
final class ParcelWatch: Sendable {
    private struct Viewer { let id: String; let isParty: Bool }
    /// Who watches, once opened; the events that arrived before.
    private let state = Mutex<(viewer: Viewer?, held: [LiveFeed.Item])>((nil, []))
    private let stream: EventStream
    private let send: @Sendable (LiveFeed.Item, EventStream) -> Bool
    private let follow: @Sendable (_ courier: String?) -> Void

    /// `send`: the feed's (false when the stream did not keep up); `follow`: whose positions go to the parcel's streams.
    init(stream: EventStream, send: @escaping @Sendable (LiveFeed.Item, EventStream) -> Bool,
         follow: @escaping @Sendable (_ courier: String?) -> Void) {
        self.stream = stream; self.send = send; self.follow = follow
    }

    /// Sends `snapshot` (the parcel as read after the watch began: at `status`, its last transition at `shownThrough`),
    /// then what arrived meanwhile that it does not show already, and goes live. `courier`: the one carrying the parcel
    /// or offered it, followed unless a transition that arrived meanwhile named one (the feed follows those itself).
    func open(snapshot: String, status: ParcelStatus, shownThrough: Date?, courier: String?, viewer: String, isParty: Bool) {
        state.withLock { s in
            if !s.held.contains(where: { $0.event == "status" }) { follow(courier) }
            stream.send(event: "snapshot", data: snapshot)
            if ParcelLifecycle.isFinal(status) { return stream.end(reason: "final_state") }
            let viewer = Viewer(id: viewer, isParty: isParty)
            s.viewer = viewer
            // A transition's event and its history row have the same time (the event's to the millisecond).
            let shownMs = shownThrough.map { ($0.timeIntervalSince1970 * 1000).rounded(.down) } ?? -.infinity
            for item in s.held {
                if let change = Self.change(item), (change.at.timeIntervalSince1970 * 1000).rounded(.down) <= shownMs { continue }
                forward(item, to: viewer)
            }
            s.held = []
        }
    }

    /// An event for the parcel (on the feed's thread).
    @Sendable func deliver(_ item: LiveFeed.Item) {
        state.withLock { s in
            guard let viewer = s.viewer else { return s.held.append(item) }
            forward(item, to: viewer)
        }
    }

    private func forward(_ item: LiveFeed.Item, to viewer: Viewer) {
        guard send(item, stream), let change = Self.change(item) else { return }
        if ParcelLifecycle.isFinal(change.to) {
            stream.end(reason: "final_state")
        } else if !viewer.isParty && (change.courierId?.lowercased != viewer.id || change.to == .awaitingCourier) {
            stream.end(reason: "access_lost")
        }
    }

    private static func change(_ item: LiveFeed.Item) -> ParcelStatusChanged? {
        guard item.event == "status" else { return nil }
        return try? Timestamp.decoder().decode(ParcelStatusChanged.self, from: Data(item.data.utf8))
    }
}

extension DispatchHandlers {
    /// `GET /v1/parcels/{id}/events`: the parcel as it is now, then every transition and courier position, live.
    func events(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self), caller = context.caller
        let stream = EventStream()
        let watch = tracking.watch(parcel: id.lowercased, stream: stream)
        let parcel: ParcelRecord, shownThrough: Date?
        do {
            (parcel, shownThrough) = try pool.withConnection { c in
                guard let p = try storage.parcel(c, id), p.involves(caller.userId) else { throw ParcelError.notFound }
                return (p, try storage.lastTransition(c, id))
            }
        } catch {
            stream.discard()
            throw error
        }
        let snapshot = String(decoding: JSON.encode(ParcelView(parcel, for: caller.userId, at: whereIs(caller.userId), earnings: earnings, media: media)), as: UTF8.self)
        // The courier carrying it, or the one it is offered to (whose accept may come before its event reaches the
        // feed): their positions go to this stream until a transition names another, or nobody.
        watch.open(snapshot: snapshot, status: parcel.status, shownThrough: shownThrough, courier: (parcel.courierId ?? parcel.offeredTo)?.lowercased,
                   viewer: caller.userId.lowercased, isParty: caller.userId == parcel.senderId || caller.userId == parcel.recipientUserId)
        return .eventStream(stream)
    }
}
