import Crypto
import Foundation
import HTTP
import Identity
import Kafka
import Postgres
import Runtime
import Web

/// Every service's settings, filled from the environment once at start.
public struct ServiceConfig: Sendable {
    /// The service name (`auth`, `stories`, ...), also its schema and event source.
    public var service: String
    /// `PORT` (0: a free port the system chooses, as tests do).
    public var port: Int
    /// `DATABASE_URL` (libpq URI).
    public var databaseURL: String
    /// `KAFKA_BROKERS`.
    public var kafkaBrokers: String
    /// `KAFKA_SESSION_TIMEOUT_MS` (default 10000; 6000 is a good local value with Tansu).
    public var kafkaSessionTimeoutMs: Int
    /// `KAFKA_GROUP_PREFIX`: put before every consumer group id (`<prefix><service>-<name>`), so environments sharing
    /// one Kafka cluster keep their groups apart (default none).
    public var kafkaGroupPrefix: String
    /// `KAFKA_NEW_GROUP_START`: where a consumer group that has committed nothing yet starts reading, `earliest`
    /// (default: every event the topics hold) or `latest` (a service deployed for the first time that should not act
    /// on the past, such as notify sending old news).
    public var kafkaNewGroupStart: String
    /// `KAFKA_TOPIC_PARTITIONS` for topics this service creates (default 3).
    public var kafkaPartitions: Int
    /// `KAFKA_REPLICATION_FACTOR` for topics this service creates (default 1).
    public var kafkaReplicationFactor: Int
    /// `LOG_LEVEL`: debug, info, warn, error.
    public var logLevel: LogLevel
    /// `BIND_ADDRESS`: where the server listens (default `::`, every IPv6 and IPv4 address; `0.0.0.0` for IPv4
    /// only, or one address such as `127.0.0.1`).
    public var bindAddress: String
    /// `HTTP_THREADS`: the threads that read and write connections (default 2; they never block).
    public var httpThreads: Int
    /// `HTTP_HANDLER_THREADS`: the threads that run handlers (default 16; each may block on the database), and
    /// `HTTP_MAX_QUEUED` requests at most waiting for one (default 1024; past that, 503 at once).
    public var handlerThreads: Int
    public var maxQueued: Int
    /// `SHUTDOWN_DELAY_SECONDS`: after SIGTERM, how long `/readyz` says 503 while everything is still served, so that
    /// load balancers stop sending before the listener closes (default 2; 0 in tests).
    public var shutdownDelaySeconds: Int
    /// `DB_STATEMENT_TIMEOUT_MS` (default 5000), `DB_LOCK_TIMEOUT_MS` (default 2000), `DB_POOL_WAIT_MS` (default 2000),
    /// `DB_IDLE_SECONDS` (default 300): see `Pool.Limits`.
    public var databaseLimits: Pool.Limits
    /// `HTTP_MAX_CONNECTIONS_PER_CLIENT` (default 512), `HTTP_HEAD_TIMEOUT_SECONDS` (default 10), `HTTP_MAX_STREAMS`
    /// (default half the connections), and in all as many connections as the file-descriptor limit allows (raised to
    /// its hard limit at start) less 256 for the database, the broker and files. `TRUSTED_PROXIES` are exempt from the
    /// per-client limit.
    public var connectionLimits: ConnectionLimits
    /// `TRUSTED_PROXIES`: the proxies whose `X-Forwarded-For` names the client (comma-separated IP addresses or
    /// CIDR ranges: on Kubernetes the gateway's pods are named by their network's range).
    public var trustedProxies: AddressSet
    /// `DB_POOL_SIZE`.
    public var dbPoolSize: Int
    /// `OUTBOX_RETENTION_HOURS`: how long sent events stay available for `republish` (at most 720, the 30 days for
    /// which consumers remember the event ids they processed, so a replay is always de-duplicated).
    public var outboxRetentionHours: Int
    /// `OUTBOX_MAX_DELAY_SECONDS`: readiness says the outbox is stuck when its oldest pending event is older (default 60).
    public var outboxMaxDelaySeconds: Int
    /// `AUTH_JWKS_URL`: where other services fetch auth's public keys.
    public var jwksURL: String
    /// `JWT_PUBLIC_KEY`: a base64url Ed25519 public key (32 bytes), used instead of the JWKS URL when set.
    public var jwtPublicKey: [UInt8]?
    /// `SERVICE_TOKEN`: the secret services present to each other (auth's list of revoked sessions).
    public var serviceToken: SharedSecret
    /// `SHUTDOWN_TIMEOUT_SECONDS`: how long a stop may take in all (default 15).
    public var shutdownTimeoutSeconds: Int
    /// `KAFKA_DEBUG`: librdkafka's own debug contexts (e.g. `cgrp,topic`), logged at debug level.
    public var kafkaDebug: String?
    /// All variables, for service-specific settings.
    public var environment: Environment

    /// Loads and validates; throws a `ConfigError` naming the first bad variable.
    public static func load(service: String, defaultPort: Int,
                            environment: Environment = Environment()) throws -> ServiceConfig {
        let env = environment
        let databaseURL = env.string("DATABASE_URL", default: "postgres://postgres@127.0.0.1:5432/\(service)")
        guard databaseURL.hasPrefix("postgres://") || databaseURL.hasPrefix("postgresql://") else {
            throw ConfigError(variable: "DATABASE_URL", problem: "must be a postgres:// or postgresql:// URI")
        }
        let brokers = env.string("KAFKA_BROKERS", default: "127.0.0.1:9092")
        for broker in brokers.split(separator: ",") {
            let parts = broker.trimmingCharacters(in: .whitespaces).split(separator: ":")
            guard parts.count == 2, !parts[0].isEmpty, let p = Int(parts[1]), (1...65535).contains(p) else {
                throw ConfigError(variable: "KAFKA_BROKERS", problem: "must be a comma-separated list of host:port (got \"\(brokers)\")")
            }
        }
        let level = try env.choice("LOG_LEVEL", default: "info", ["debug", "info", "warn", "error"])
        let jwks = env.string("AUTH_JWKS_URL", default: "http://127.0.0.1:8081/v1/auth/jwks")
        guard jwks.hasPrefix("http://") else {
            throw ConfigError(variable: "AUTH_JWKS_URL", problem: "must be an http:// URL")
        }
        var publicKey: [UInt8]?
        if let text = env.optional("JWT_PUBLIC_KEY") {
            guard let raw = Crypto.Base64URL.decode(text), raw.count == 32 else {
                throw ConfigError(variable: "JWT_PUBLIC_KEY", problem: "must be a base64url Ed25519 public key (32 bytes)")
            }
            publicKey = raw
        }
        let groupPrefix = env.string("KAFKA_GROUP_PREFIX", default: "")
        guard groupPrefix.count <= 100, groupPrefix.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }) else {
            throw ConfigError(variable: "KAFKA_GROUP_PREFIX", problem: "must be at most 100 of A-Z a-z 0-9 . _ -")
        }
        var proxies = AddressSet()
        for item in env.string("TRUSTED_PROXIES", default: "").split(separator: ",") {
            let address = item.trimmingCharacters(in: .whitespaces)
            guard proxies.insert(address) else {
                throw ConfigError(variable: "TRUSTED_PROXIES", problem: "must be a comma-separated list of IP addresses or CIDR ranges such as 10.244.0.0/16 (got \"\(address)\")")
            }
        }
        let bindAddress = env.string("BIND_ADDRESS", default: "::")
        guard Validate.isIPAddress(bindAddress) else {
            throw ConfigError(variable: "BIND_ADDRESS", problem: "must be an IPv4 or IPv6 address such as :: or 0.0.0.0 (got \"\(bindAddress)\")")
        }
        let total = max(64, ConnectionLimits.raiseFileLimit() - 256)
        let limits = ConnectionLimits(
            total: total,
            perClient: try env.int("HTTP_MAX_CONNECTIONS_PER_CLIENT", default: 512, range: 1...1_000_000),
            headTimeoutSeconds: try env.int("HTTP_HEAD_TIMEOUT_SECONDS", default: 10, range: 1...3600),
            streams: try env.int("HTTP_MAX_STREAMS", default: total / 2, range: 1...1_000_000),
            exempt: proxies,
            bodyTimeoutSeconds: try env.int("HTTP_BODY_TIMEOUT_SECONDS", default: 60, range: 1...3600),
            bodyMemory: try env.int("HTTP_BODY_MEMORY_MB", default: 64, range: 1...65536) << 20)
        let databaseLimits = Pool.Limits(
            statementTimeoutMs: try env.int("DB_STATEMENT_TIMEOUT_MS", default: 5000, range: 0...3_600_000),
            lockTimeoutMs: try env.int("DB_LOCK_TIMEOUT_MS", default: 2000, range: 0...3_600_000),
            acquireTimeoutMs: try env.int("DB_POOL_WAIT_MS", default: 2000, range: 1...600_000),
            idleSeconds: try env.int("DB_IDLE_SECONDS", default: 300, range: 1...86_400))
        return ServiceConfig(
            service: service,
            port: try env.int("PORT", default: defaultPort, range: 0...65535),
            databaseURL: databaseURL,
            kafkaBrokers: brokers,
            kafkaSessionTimeoutMs: try env.int("KAFKA_SESSION_TIMEOUT_MS", default: 10000, range: 1000...300_000),
            kafkaGroupPrefix: groupPrefix,
            kafkaNewGroupStart: try env.choice("KAFKA_NEW_GROUP_START", default: "earliest", ["earliest", "latest"]),
            kafkaPartitions: try env.int("KAFKA_TOPIC_PARTITIONS", default: 3, range: 1...1000),
            kafkaReplicationFactor: try env.int("KAFKA_REPLICATION_FACTOR", default: 1, range: 1...10),
            logLevel: LogLevel(rawValue: level) ?? .info,
            bindAddress: bindAddress,
            httpThreads: try env.int("HTTP_THREADS", default: 2, range: 1...64),
            handlerThreads: try env.int("HTTP_HANDLER_THREADS", default: 16, range: 1...1024),
            maxQueued: try env.int("HTTP_MAX_QUEUED", default: 1024, range: 1...1_000_000),
            shutdownDelaySeconds: try env.int("SHUTDOWN_DELAY_SECONDS", default: 2, range: 0...600),
            databaseLimits: databaseLimits,
            connectionLimits: limits,
            trustedProxies: proxies,
            dbPoolSize: try env.int("DB_POOL_SIZE", default: 10, range: 1...500),
            outboxRetentionHours: try env.int("OUTBOX_RETENTION_HOURS", default: 168, range: 1...720),
            outboxMaxDelaySeconds: try env.int("OUTBOX_MAX_DELAY_SECONDS", default: 60, range: 1...86_400),
            jwksURL: jwks,
            jwtPublicKey: publicKey,
            serviceToken: try SharedSecret.serviceToken(env),
            shutdownTimeoutSeconds: try env.int("SHUTDOWN_TIMEOUT_SECONDS", default: 15, range: 1...3600),
            kafkaDebug: env.optional("KAFKA_DEBUG"),
            environment: env)
    }

    /// The Kafka settings of this service: the one place they are made from the environment's.
    public func kafka(logger: Logger) -> KafkaConfig {
        var kafka = KafkaConfig(brokers: kafkaBrokers, clientId: service)
        kafka.sessionTimeoutMs = kafkaSessionTimeoutMs
        kafka.newGroupStart = kafkaNewGroupStart
        if let kafkaDebug { kafka.extra["debug"] = kafkaDebug }
        kafka.log = { level, message in logger.log(level <= 3 ? .error : level == 4 ? .warn : .debug, message) }
        return kafka
    }
}
