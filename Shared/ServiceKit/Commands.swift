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

/// The executable's entry point and the operator commands.
extension ServiceApp {
    /// The whole of an executable's `main`: signal handling first (as PID 1 in a container a process ignores
    /// SIGTERM unless it handles it), then the configuration, then `run` or an operator command (`migrate`,
    /// `republish --since <time>`, and the service's own). Exits 0 after a graceful stop, 64 on a bad command, 78 on a bad setting, 69 when
    /// the database cannot be reached, 70 when migrations fail, 71 when the port is taken.
    public static func main(service: String, _ make: (Environment) throws -> ServiceApp) -> Never {
        let signals = SignalTrap()
        let arguments = Array(CommandLine.arguments.dropFirst())
        // A fixed threshold: glibc would raise it after the first large free, then keep blocks such as Argon2's
        // 19 MiB in every thread's arena for good (auth held 387 MB after a burst of sign-ups, 43 MB fresh).
        shim_fix_mmap_threshold(1 << 20)
        let app: ServiceApp
        // An operator command (a migration, an import) may take long and wait for locks: no request timeouts, unless set.
        var environment = ProcessInfo.processInfo.environment
        if !arguments.isEmpty {
            environment["DB_STATEMENT_TIMEOUT_MS"] = environment["DB_STATEMENT_TIMEOUT_MS"] ?? "0"
            environment["DB_LOCK_TIMEOUT_MS"] = environment["DB_LOCK_TIMEOUT_MS"] ?? "0"
        }
        do { app = try make(Environment(environment)) } catch {
            Logger(service: service).error("\(error)")
            exit(78)
        }
        signals.onSignal { app.stop() }
        do {
            if !arguments.isEmpty { exit(try app.runCommand(arguments)) }
            try app.run()
            exit(0)
        } catch let error as StartupError {
            app.logger.error(error.description)
            exit(error.exitCode)
        } catch {
            app.logger.error("start-up failed", ["error": .string("\(error)")])
            exit(1)
        }
    }

    /// Runs an operator command; returns its exit status.
    func runCommand(_ arguments: [String]) throws -> Int32 {
        switch arguments[0] {
        case "migrate":
            guard try prepareDatabase() else { return 0 }
            logger.info("migrations are up to date")
            return 0
        case "republish":
            guard arguments.count == 3, arguments[1] == "--since", let since = Timestamp.parse(arguments[2]) else {
                logger.error("usage: \(config.service) republish --since <RFC 3339 time, e.g. 2026-11-30T00:00:00Z>")
                return 64
            }
            guard try prepareDatabase() else { return 0 }
            let n = try relay.republish(since: since)
            logger.info("published the events again",
                        ["events": .int(n), "since": .string(Timestamp.format(since))])
            return 0
        case "create-topics":
            return try createAllTopics()
        default:
            guard let command = commands.first(where: { $0.name == arguments[0] }) else {
                let names = ["migrate", "republish --since <time>", "create-topics"] + commands.map(\.usage)
                logger.error("unknown command \"\(arguments[0])\"; commands: \(names.joined(separator: ", "))")
                return 64
            }
            guard try prepareDatabase() else { return 0 }
            return try command.run(self, Array(arguments.dropFirst()))
        }
    }

    /// `create-topics`: creates every topic of the catalogue and the consumers' dead-letter topics with
    /// `KAFKA_TOPIC_PARTITIONS` and `KAFKA_REPLICATION_FACTOR` (a deployment's one-shot job; no database needed),
    /// through the relay's own creation and check, waiting up to a minute for the broker. Fails when a topic exists
    /// with another partition count (the relay's log names each).
    func createAllTopics() throws -> Int32 {
        let names = EventCatalogue.allTopicNames
        relay.addTopics(names)
        let deadline = Date().addingTimeInterval(60)
        while true {
            do {
                guard try relay.createTopics().isEmpty else { return 1 }
                logger.info("topics ready", ["topics": .int(names.count), "partitions": .int(config.kafkaPartitions),
                                             "replicationFactor": .int(config.kafkaReplicationFactor)])
                return 0
            } catch {
                guard Date() < deadline, !stopping.isCancelled else { throw error }
                logger.warn("cannot create topics yet; retrying", ["error": .string("\(error)")])
                stopping.sleep(2)
            }
        }
    }

}


/// An operator command of a service (`curation import FILE`): it runs instead of the server, once the database is
/// migrated, and its result is the process's exit status.
public struct Command: Sendable {
    public let name: String
    /// How to call it, for the list of commands.
    public let usage: String
    public let run: @Sendable (ServiceApp, [String]) throws -> Int32

    public init(_ name: String, usage: String, run: @escaping @Sendable (ServiceApp, [String]) throws -> Int32) {
        self.name = name; self.usage = usage; self.run = run
    }
}

/// Why a service could not start; each has its own exit status.
public enum StartupError: Error, CustomStringConvertible {
    case cannotListen(port: Int)
    case databaseUnreachable(String)
    case migrationsFailed(String)

    public var description: String {
        switch self {
        case .cannotListen(let port): return "cannot listen on port \(port) (in use?) (PORT)"
        case .databaseUnreachable(let message): return "cannot reach the database named by DATABASE_URL: \(message)"
        case .migrationsFailed(let message): return "migrations failed: \(message)"
        }
    }

    var exitCode: Int32 {
        switch self {
        case .cannotListen: return 71
        case .databaseUnreachable: return 69
        case .migrationsFailed: return 70
        }
    }
}
