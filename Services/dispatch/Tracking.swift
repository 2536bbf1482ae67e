import Foundation
import HTTP
import Kafka
import Models
import ServiceKit

/// Live tracking: every instance reads `parcel.status` and `courier.location` from now on (no consumer group) and
/// forwards them to the event streams its clients hold, so a watcher sees every transition whichever instance
/// made it, and the courier's positions.
///
/// `@unchecked Sendable`: the watcher maps are guarded by `lock`.
final class ParcelTracking: @unchecked Sendable {
    private struct Watcher { let stream: EventStream; let since: Date }
    private let lock = NSLock()
    private var byParcel: [String: [ObjectIdentifier: Watcher]] = [:]
    private var courierOf: [String: String] = [:]  // parcel → courier, for positions
    private let kafka: KafkaConfig
    private let logger: Logger
    private let publish: @Sendable (OutgoingMessage) -> Void

    init(kafka: KafkaConfig, logger: Logger, publish: @escaping @Sendable (OutgoingMessage) -> Void) {
        self.kafka = kafka; self.logger = logger; self.publish = publish
    }

    private var reading = false

    /// Whether the topics are being read (from where they ended when reading began).
    var isReading: Bool { lock.lock(); defer { lock.unlock() }; return reading }

    /// Starts reading the topics.
    func start() {
        let thread = Thread { [self] in run() }
        thread.name = "parcel-tracking"
        thread.start()
    }

    /// Streams a parcel's transitions (from now on) and its courier's positions to `stream`.
    func watch(parcel: String, courier: String?, stream: EventStream) {
        lock.lock()
        byParcel[parcel, default: [:]][ObjectIdentifier(stream)] = Watcher(stream: stream, since: Date().addingTimeInterval(-1))
        if let courier { courierOf[parcel] = courier }
        lock.unlock()
        stream.onClose { [weak self, weak stream] in
            guard let self, let stream else { return }
            self.lock.lock()
            self.byParcel[parcel]?[ObjectIdentifier(stream)] = nil
            if self.byParcel[parcel]?.isEmpty == true { self.byParcel[parcel] = nil; self.courierOf[parcel] = nil }
            self.lock.unlock()
        }
    }

    /// Publishes a courier's fix for the watchers of their parcels (not through the outbox: positions are ephemeral).
    func publishPosition(_ location: CourierLocation) {
        let event = CloudEvent(id: UUID.v7().lowercased, source: "/dispatch", type: CourierLocation.type, time: location.at,
                               subject: location.courierId, dataschema: dataSchemaURI(for: CourierLocation.type), data: location)
        guard let value = try? JSON.encode(event) else { return }
        publish(OutgoingMessage(topic: CourierLocation.type, key: location.courierId, value: value, header: ("ce_type", CourierLocation.type)))
    }

    private func run() {
        var consumer: Consumer?
        while consumer == nil {
            do {
                let c = try Consumer(config: kafka, groupId: "tracking-\(UUID().uuidString.lowercased())")
                try c.assignFromEnd([ParcelStatusChanged.type, CourierLocation.type])
                consumer = c
                lock.lock(); reading = true; lock.unlock()
            } catch {
                logger.warn("cannot read parcel events yet; retrying", ["error": .string("\(error)")])
                Thread.sleep(forTimeInterval: 1)
            }
        }
        var seen: Set<String> = []  // the broker may hand back its last batch again
        while let consumer {
            guard let message = consumer.poll(timeout: 0.5), let event = ReceivedEvent(message.value) else { continue }
            if seen.contains(event.id) { continue }
            seen.insert(event.id)
            if seen.count > 100_000 { seen.removeAll() }
            if event.type == ParcelStatusChanged.type, let change = try? event.decode(ParcelStatusChanged.self) {
                deliver(parcel: change.parcelId, event: "status", data: event, time: event.time, courier: change.courierId)
            } else if event.type == CourierLocation.type, let fix = try? event.decode(CourierLocation.self) {
                lock.lock()
                let parcels = courierOf.filter { $0.value == fix.courierId }.map(\.key)
                lock.unlock()
                for parcel in parcels { deliver(parcel: parcel, event: "position", data: event, time: event.time, courier: nil) }
            }
        }
    }

    private func deliver(parcel: String, event name: String, data event: ReceivedEvent, time: Date?, courier: String?) {
        lock.lock()
        if let courier { courierOf[parcel] = courier }
        let watchers = Array((byParcel[parcel] ?? [:]).values)
        lock.unlock()
        guard let payload = Self.data(of: event.raw) else { return }
        for w in watchers where (time ?? Date()) >= w.since {
            w.stream.send(event: name, id: event.id, data: payload)
        }
    }

    /// The `data` member of an envelope, as compact JSON text.
    static func data(of raw: [UInt8]) -> String? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(raw)) as? [String: Any], let data = object["data"],
              let bytes = try? JSONSerialization.data(withJSONObject: data, options: [.sortedKeys]) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension DispatchHandlers {
    /// `GET /v1/parcels/{id}/events`: the parcel as it is now, then every transition and courier position, live.
    func events(_ request: Request, _ caller: Caller) throws -> Response {
        let id = try Validate.pathID(request)
        let parcel: ParcelRecord = try pool.withConnection { c in
            guard let p = try storage.parcel(c, id), p.involves(caller.userId) else { throw HTTPError.notFound() }
            return p
        }
        let stream = EventStream()
        tracking.watch(parcel: id.lowercased, courier: parcel.courierId?.lowercased, stream: stream)
        let snapshot = (try? JSON.encode(ParcelView(parcel))).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        stream.send(event: "snapshot", data: snapshot)
        return .eventStream(stream)
    }
}
