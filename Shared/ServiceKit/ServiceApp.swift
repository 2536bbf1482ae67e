import CShims
import Crypto
import Events
import Foundation
import HTTP
import Identity
import Kafka
import Models
import Postgres
import Runtime
import Synchronization
import Web


/// One service process: configuration, logger, metrics, database pool, outbox relay, consumers, live feeds, jobs
/// and the HTTP server.
///
/// `init` only reads and checks the configuration (it throws a `ConfigError` naming a bad setting, and touches no
/// database). `run` opens the HTTP port at once (`/healthz` answers from the first second; `/readyz` says 503 until
/// everything is ready), waits for the database and migrates it, calls the service's `setup` to wire its routes and
/// background services, starts them, serves until `stop`, then stops the HTTP server, the background services and
/// the outbox relay in turn by one deadline (`SHUTDOWN_TIMEOUT_SECONDS`) and returns. A test runs a service
/// in-process this way; an executable calls `ServiceApp.main`, which adds signal handling and the operator commands.
///
/// `@unchecked Sendable`: `services`, `checks`, `readers` and `consumerHandlers` are written only by `setup`, on the
/// thread of `run`, before the services start and before `serving` is set (`testTokenKeys` before `setup`);
/// everything else is immutable or synchronised itself.
public final class ServiceApp: @unchecked Sendable {
    /// Builds the service once the database is ready: returns its routes, and adds its background services.
    public typealias Setup = (ServiceApp) throws -> Router

    public let config: ServiceConfig
    public let logger: Logger
    public let metrics = Metrics()
    public let pool: Pool
    public let kafka: KafkaConfig
    public let relay: OutboxRelay
    /// Writes events in the caller's transaction.
    public let outbox: Outbox
    /// Stores first responses of creating POSTs by `Idempotency-Key`.
    public let idempotency: Idempotency
    /// Opens once the service's topics exist; readers that are not consumer groups wait for it.
    public let topicsReady = Gate()

    let migrations: [Migration]
    let setup: Setup
    let commands: [Command]
    let stopping = Cancellation()
    let serving = Atomic<Bool>(false)
    /// The routes every request is matched against: the health routes while the service starts, then all of them.
    /// Each is set once and read without a lock (a lock here made every request of every thread queue on it).
    let startingRoutes = AtomicLazyReference<Routes>()
    let servingRoutes = AtomicLazyReference<Routes>()
    final class Routes: Sendable {
        let router: Router
        init(_ router: Router) { self.router = router }
    }
    let bound = Atomic<Int>(0)
    let readiness = ReadinessCache()
    /// What `service_ready` says: 1 when the last look found the service ready.
    let readyGauge = ReadyGauge()
    let middleware: [any Middleware]
    /// Counts and logs what the connection limits and the stream budget turn away, one log line per reason at most
    /// every 10 s, whichever of them turned it away.
    let refusals: RefusalLog
    var services: [any BackgroundService] = []
    var checks: [(name: String, isReady: @Sendable () -> Bool)] = []
    /// What an in-process test harness (`@testable import`, so never a deployment) sets before it calls `setup`:
    /// the keys its tokens are signed with, taken by `makeTokenVerifier` instead of auth's, with no revocation feed.
    var testTokenKeys: [String: [UInt8]]?
    /// Every consumer's handler by the topics it reads, for such a harness to hand events to without a broker.
    var consumerHandlers: [(topics: [String], handler: EventConsumer.Handler)] = []

    /// Reads and checks the configuration; throws a `ConfigError` naming the first bad setting. The topics the
    /// service produces (`EventCatalogue`) and those it reads are created when missing; `setup` runs in `run` once
    /// the database is migrated.
    public init(service: String, defaultPort: Int, environment: Environment = Environment(), migrations: [Migration],
                commands: [Command] = [], setup: @escaping Setup) throws {
        let config = try ServiceConfig.load(service: service, defaultPort: defaultPort, environment: environment)
        self.config = config
        let logger = Logger(service: service, minimum: config.logLevel)
        self.logger = logger
        self.migrations = migrations
        self.setup = setup
        self.commands = commands
        refusals = RefusalLog(logger: logger, metrics: metrics)
        middleware = [RequestIDMiddleware(), AccessLogMiddleware(logger: logger, metrics: metrics),
                      StreamBudgetMiddleware(limit: config.connectionLimits.streams, refusals: refusals),
                      ErrorMiddleware(logger: logger)]
        pool = Pool(url: config.databaseURL, maxSize: config.dbPoolSize, limits: config.databaseLimits, applicationName: service)
        let kafka = config.kafka(logger: logger)
        self.kafka = kafka
        relay = OutboxRelay(pool: pool, databaseURL: config.databaseURL, schema: service, kafka: kafka,
                            topics: .init(names: Array(Set(EventCatalogue.produced(by: service) + [SessionRevoked.type])).sorted(),
                                          partitions: config.kafkaPartitions, replicationFactor: config.kafkaReplicationFactor),
                            retentionHours: config.outboxRetentionHours, maxDelaySeconds: config.outboxMaxDelaySeconds,
                            logger: logger, metrics: metrics)
        outbox = Outbox(schema: service, source: "/\(service)")
        idempotency = Idempotency(pool: pool, schema: service)
        let pool = self.pool
        metrics.addGauges(help: ["service_ready": "1 while /readyz answers 200 (looked at every 5 s), else 0."]) { [readyGauge] in
            [("service_ready", "", Double(readyGauge.value.load(ordering: .relaxed)))]
        }
        metrics.addGauges(help: ["db_pool_connections": "Pooled PostgreSQL connections, by state.",
                                 "db_pool_max_connections": "The most connections the pool opens."]) {
            let s = pool.stats
            return [("db_pool_connections", "state=\"in_use\"", Double(s.inUse)),
                    ("db_pool_connections", "state=\"idle\"", Double(s.open - s.inUse)),
                    ("db_pool_max_connections", "", Double(s.max))]
        }
        // The database's replication slots (a replica's, a change-data-capture tool's), the same from every service
        // since they are the cluster's: the WAL each keeps from removal, and whether anything reads it. A slot nobody
        // reads keeps every segment from its position on, until the disk is full (the ReplicationSlotWALHeld alert).
        metrics.addGauges(help: ["postgres_replication_slot_retained_wal_bytes": "WAL the database keeps for the replication slot.",
                                 "postgres_replication_slot_active": "1 while something reads from the replication slot, else 0."]) {
            guard let rows = try? pool.withConnection({ c in
                try c.rows("""
                    SELECT slot_name, active::int AS active,
                        COALESCE(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)::float8 AS retained
                    FROM pg_replication_slots ORDER BY slot_name
                    """)
            }) else { return [] }
            return rows.flatMap { row -> [(String, String, Double)] in
                guard let name = try? row["slot_name", as: String.self], let active = try? row["active", as: Int.self],
                      let retained = try? row["retained", as: Double.self] else { return [] }
                let label = "slot=\"\(Metrics.escape(name))\""
                return [("postgres_replication_slot_retained_wal_bytes", label, retained),
                        ("postgres_replication_slot_active", label, Double(active))]
            }
        }
    }

    // MARK: - Wiring (from `setup`)

    /// Adds a background service, started in the order added after the relay and the consumers' topics, and stopped
    /// with the others after the HTTP server and before the relay.
    public func add(_ service: any BackgroundService) {
        if let feed = service as? LiveFeed {
            relay.addTopics(feed.topics)
            readers += feed.topics.map { ($0, EventCatalogue.Reader(service: config.service, name: feed.name, isFeed: true)) }
        }
        services.append(service)
    }

    /// What the service reads, by topic (what `EventCatalogue` must say; a test compares them).
    public private(set) var readers: [(topic: String, reader: EventCatalogue.Reader)] = []

    /// Adds a check that must hold before `/readyz` says ready (`name` is its key in the answer; checks named
    /// `broker` fold into the broker's).
    public func addReadinessCheck(_ name: String, _ isReady: @escaping @Sendable () -> Bool) {
        checks.append((name, isReady))
    }

    /// Adds a consumer-group consumer whose handler runs in a transaction with de-duplication. Services declare theirs
    /// by payload type (`consume(_:_:)`), so that the topics they read follow from their handlers.
    func consume(_ name: String, topics: [String], handler: @escaping EventConsumer.Handler) {
        relay.addTopics(topics + topics.map { $0 + ".dlq" })
        consumerHandlers.append((topics, handler))
        readers += topics.map { ($0, EventCatalogue.Reader(service: config.service, name: name, isFeed: false)) }
        let consumer = EventConsumer(name: name, kafka: kafka, groupId: "\(config.kafkaGroupPrefix)\(config.service)-\(name)",
                                     topics: topics, pool: pool, schema: config.service, relay: relay, topicsReady: topicsReady,
                                     logger: logger, metrics: metrics, handler: handler)
        add(consumer)
        metrics.addGauges(help: ["kafka_consumer_assigned_partitions": "Partitions this instance's consumer holds, by consumer group.",
                                 "kafka_consumer_lag": "Events in those partitions it has not processed yet (looked at every 5 s)."]) {
            [("kafka_consumer_assigned_partitions", "consumer=\"\(name)\"", Double(consumer.assignedPartitions)),
             ("kafka_consumer_lag", "consumer=\"\(name)\"", Double(consumer.lag))]
        }
    }

    /// A token verifier for services other than auth: keys from `AUTH_JWKS_URL` (or `JWT_PUBLIC_KEY`, checked at
    /// start), revocations from `session.revoked` and, with `SERVICE_TOKEN`, from auth's list at the same host as
    /// `AUTH_JWKS_URL`. Adds what keeps it current: the revocation feed and its sync, and while auth has not answered
    /// yet, a job that asks for the keys (readiness waits for all of them: `revocations`, `signingKeys`).
    public func makeTokenVerifier() -> TokenVerifier {
        if let testTokenKeys { return TokenVerifier(keys: testTokenKeys, revocations: nil, logger: logger) }
        var fetchList: (@Sendable (Date?) throws -> RevokedSessionList)?
        if let token = config.serviceToken.token {
            fetchList = { [jwksURL = config.jwksURL] since in
                // The list is served at the host of AUTH_JWKS_URL.
                let query = since.map { "?since=" + Timestamp.format($0) } ?? ""
                guard let url = URL(string: "/v1/internal/revoked-sessions" + query, relativeTo: URL(string: jwksURL)) else {
                    throw FetchError("AUTH_JWKS_URL is not a URL")
                }
                guard let (status, body) = Fetch.get(url.absoluteURL, headers: ["Authorization": "Bearer " + token], timeout: 2) else {
                    throw FetchError("auth did not answer at \(url.absoluteString)")
                }
                guard status == 200 else { throw FetchError("auth answered \(status)") }
                return try JSONDecoder().decode(RevokedSessionList.self, from: body)
            }
        } else {
            logger.warn("SERVICE_TOKEN is not set: revocations come from session.revoked alone, which a broker that loses its data forgets")
        }
        let revocations = SessionRevocations(kafka: kafka, topicsReady: topicsReady, logger: logger, fetchList: fetchList)
        add(revocations.feed)
        add(revocations.sync)
        addReadinessCheck("revocations") { revocations.isReady }
        if let key = config.jwtPublicKey {
            return TokenVerifier(keys: ["static": key], revocations: revocations, logger: logger)
        }
        let verifier = TokenVerifier(jwksURL: config.jwksURL, revocations: revocations, logger: logger)
        addReadinessCheck("signingKeys") { verifier.hasKeys }
        let loaded = verifier.refreshKeys()
        // Auth may start after us: ask every 2 s until it answers; then every minute, so a rotated key is known
        // before it signs (`auth rotate-keys` publishes it 5 minutes ahead by default).
        add(Job("jwks-refresh") { cancellation in
            var known = loaded
            while cancellation.sleep(known ? 60 : 2) { known = verifier.refreshKeys(abandon: { cancellation.isCancelled }) || known }
        })
        return verifier
    }
}
