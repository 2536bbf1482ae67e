import Foundation
import HTTP
import Kafka
import Runtime
import Synchronization

/// Reads topics on every instance without a consumer group (so no join delay, and every instance sees every
/// event), decodes each event once, and delivers it to the event streams watching its keys, through a dictionary.
/// Used for live views (parcel tracking, chat rooms) and for broadcast state (session revocations).
///
/// A stream that does not keep up is ended with a logged reason rather than allowed to grow memory: see
/// `EventStream.maxPending`.
public final class LiveFeed: BackgroundService {
    /// Where reading starts: the partitions' current ends (live views), or their beginnings (state rebuilt from
    /// the whole topic).
    public enum Start: Sendable { case beginning, end }

    /// What one event becomes: the keys whose watchers get it, the SSE event name, and optionally its SSE id (the
    /// event id by default) and how to load its data when someone here watches (its `data` by default). Nil
    /// delivers nothing.
    public struct Delivery: Sendable {
        public var keys: [String]
        public var event: String
        public var id: String?
        public var load: (@Sendable () -> String?)?
        public init(keys: [String], event: String, id: String? = nil, load: (@Sendable () -> String?)? = nil) {
            self.keys = keys; self.event = event; self.id = id; self.load = load
        }
    }

    /// One delivered event, as a watcher receives it, with its SSE bytes framed once for every watcher.
    public struct Item: Sendable {
        public let id: String
        public let event: String
        public let data: String
        public let time: Date
        public let frame: [UInt8]
    }

    private struct Watcher: Sendable {
        let deliver: @Sendable (Item) -> Void
        let since: Date
    }

    public let name: String
    public let topics: [String]
    private let start: Start
    private let kafka: KafkaConfig
    private let fetchWaitMs: Int
    private let topicsReady: Gate
    private let logger: Logger
    private let route: @Sendable (ReceivedEvent) -> Delivery?
    private let onAttach: (@Sendable () -> Void)?
    private let watchers = Mutex<[String: [ObjectIdentifier: Watcher]]>([:])
    private let reading = Atomic<Bool>(false)
    private let watchesAnswers: Bool
    /// The consumer while the feed reads, and when (`DispatchTime` nanoseconds) it attached, for
    /// `secondsSinceBrokerAnswered` (which only reads an atomic of the consumer).
    private let attached = Mutex<(consumer: Consumer, at: UInt64)?>(nil)

    /// A feed of `topics`, read from `start` once `topicsReady` opens; `route` tells where each event goes (and may
    /// record what it says, as revocations do). `onAttach` runs each time the feed starts reading: at first, and again
    /// after the broker lost every connection or the topics (a restarted Tansu forgets them), when the feed attaches
    /// anew from `start` once the topics are back. `fetchWaitMs`: how long the broker may hold a fetch that finds
    /// nothing (see `Consumer`); 100 for views people watch, which Tansu then serves within tens of milliseconds.
    /// `watchesAnswers`: keep `secondsSinceBrokerAnswered` (from librdkafka's statistics, every 100 ms).
    public init(name: String, topics: [String], start: Start, kafka: KafkaConfig, topicsReady: Gate, logger: Logger,
                fetchWaitMs: Int = 100, watchesAnswers: Bool = false, onAttach: (@Sendable () -> Void)? = nil,
                route: @escaping @Sendable (ReceivedEvent) -> Delivery?) {
        self.name = name; self.topics = topics; self.start = start; self.kafka = kafka; self.fetchWaitMs = fetchWaitMs
        self.watchesAnswers = watchesAnswers
        self.topicsReady = topicsReady; self.logger = logger; self.onAttach = onAttach; self.route = route
    }

    /// Whether the topics are being read (everything written from now on will be delivered).
    public var isReading: Bool { reading.load(ordering: .acquiring) }

    /// Seconds since the broker last answered the feed's fetches (it answers one at least every `fetchWaitMs` while
    /// it works); infinity while the feed does not read or without `watchesAnswers`. A broker that stopped or froze
    /// shows here within a statistics interval of its last answer, long before librdkafka gives up on it.
    public var secondsSinceBrokerAnswered: TimeInterval {
        guard watchesAnswers else { return .infinity }
        // Read under the lock: a copy taken out could be the consumer's last reference, and closing it takes a while.
        return attached.withLock { attached in
            guard let (consumer, at) = attached else { return .infinity }
            // Attaching took the broker's answers; its statistics come a moment later.
            let now = DispatchTime.now().uptimeNanoseconds
            return min(consumer.secondsSinceBrokerAnswered, Double(now - min(at, now)) / 1e9)
        }
    }

    /// Sends the events for `key` from now on to `stream`, until it closes; `then` sees each event once it was sent
    /// (to end the stream after a final one, say).
    public func watch(_ key: String, stream: EventStream, then: (@Sendable (Item) -> Void)? = nil) {
        watch(key, until: stream) { [unowned self] item in
            guard send(item, to: stream) else { return }
            then?(item)
        }
    }

    /// Sends `item` to `stream`; false (and logged) when the stream did not keep up and was ended.
    @discardableResult
    public func send(_ item: Item, to stream: EventStream) -> Bool {
        guard stream.send(frame: item.frame) else {
            logger.warn("ended a live stream that did not keep up", ["feed": .string(name), "limitBytes": .int(EventStream.maxPending)])
            return false
        }
        return true
    }

    /// Hands the events for `key` from now on to `deliver` (on the feed's thread: it must not block for long), until
    /// `stream` closes. For watchers that do more than send, such as filling a gap from the database.
    public func watch(_ key: String, until stream: EventStream, deliver: @escaping @Sendable (Item) -> Void) {
        let id = ObjectIdentifier(stream)
        // A second back: the broker's clock and ours differ a little, and an event of this very moment counts.
        watchers.withLock { $0[key, default: [:]][id] = Watcher(deliver: deliver, since: Date().addingTimeInterval(-1)) }
        stream.onClose { [weak self] in
            self?.watchers.withLock { all in
                all[key]?[id] = nil
                if all[key]?.isEmpty == true { all[key] = nil }
            }
        }
    }

    /// Whether anyone watches `key` on this instance.
    public func isWatched(_ key: String) -> Bool { watchers.withLock { $0[key] != nil } }

    public func run(until cancellation: Cancellation) {
        guard topicsReady.wait(cancellation) else { return }
        var seen = Set<String>()  // Tansu may hand back its last batch again; a re-attached feed reads events again
        while let consumer = attach(cancellation) {
            onAttach?()
            attached.withLock { $0 = (consumer, DispatchTime.now().uptimeNanoseconds) }
            reading.store(true, ordering: .releasing)
            while !cancellation.isCancelled {
                if let message = consumer.poll(timeout: 0.2), let event = ReceivedEvent(message.value), seen.insert(event.id).inserted {
                    if seen.count > 100_000 { seen = [event.id] }
                    if let delivery = route(event) { TraceContext.with(event.trace?.child()) { deliver(event, delivery) } }
                }
                if consumer.lostItsTopics() {
                    logger.warn("the broker lost its connection or the feed's topics; attaching again", ["feed": .string(name)])
                    break
                }
            }
            reading.store(false, ordering: .releasing)
            attached.withLock { $0 = nil }
        }
    }

    /// A consumer assigned to every partition of the topics, retried every second until they exist; nil when cancelled.
    private func attach(_ cancellation: Cancellation) -> Consumer? {
        while !cancellation.isCancelled {
            do {
                let c = try Consumer(config: kafka, groupId: "\(name)-\(UUID().uuidString.lowercased())", fetchWaitMs: fetchWaitMs,
                                     statisticsIntervalMs: watchesAnswers ? 100 : 0)
                switch start {
                case .beginning: try c.assignFromBeginning(topics)
                case .end: try c.assignFromEnd(topics)
                }
                return c
            } catch {
                logger.warn("cannot read the feed's topics yet; retrying", ["feed": .string(name), "error": .string("\(error)")])
                cancellation.sleep(1)
            }
        }
        return nil
    }

    private func deliver(_ event: ReceivedEvent, _ delivery: Delivery) {
        let targets = watchers.withLock { all in delivery.keys.flatMap { all[$0].map { Array($0.values) } ?? [] } }
        guard !targets.isEmpty, let data = delivery.load.map({ $0() }) ?? event.dataText else { return }
        let id = delivery.id ?? event.id
        let item = Item(id: id, event: delivery.event, data: data, time: event.time ?? Date(),
                        frame: EventStream.frame(event: delivery.event, id: id.isEmpty ? nil : id, data: data))
        for watcher in targets where item.time >= watcher.since { watcher.deliver(item) }
        logger.debug("event sent to live streams", ["feed": .string(name), "type": .string(event.type), "eventId": .string(event.id),
                                                    "streams": .int(targets.count)])
    }
}
