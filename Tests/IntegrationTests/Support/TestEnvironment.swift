import Foundation
import HTTP
import Kafka
import Postgres
import WireClient
import XCTest

/// What `deploy/local/stack test` provides: the database server, the broker, the built services.
enum TestEnvironment {
    static let env = ProcessInfo.processInfo.environment

    /// The admin database URL (the stack's `backend` database).
    static var adminDatabaseURL: String { env["TEST_DATABASE_URL"] ?? "postgres://postgres@127.0.0.1:5432/postgres" }
    /// The shared broker.
    static var brokers: String { env["KAFKA_BROKERS"] ?? "127.0.0.1:9092" }
    /// The key the services sign image URLs with (MEDIA_URL_KEYS): one for every service of a test, as in a deployment.
    static let mediaURLKeys = "test:" + String(repeating: "k", count: 40)
    /// Where the services keep images (MEDIA_STORE): a folder of this run's, shared as a bucket would be.
    static let mediaStore = "file://" + FileManager.default.temporaryDirectory.appendingPathComponent("media-\(UUID().uuidString.prefix(8))").path
    /// The Python of the stack's venv (beside schemathesis's `st`), which has the packages the tests use.
    static func venvPython() throws -> String {
        guard let st = env["SCHEMATHESIS_BIN"] else { throw TestFailure("run the tests with deploy/local/stack test (SCHEMATHESIS_BIN names the venv)") }
        return URL(fileURLWithPath: st).deletingLastPathComponent().appendingPathComponent("python").path
    }
    /// Where the service executables are.
    static var binDir: String {
        env["SERVICE_BIN_DIR"] ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(".build/debug").path
    }
    /// The repository root.
    static var root: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
    }
    /// The Tansu binary (for tests that need a broker of their own to stop and start).
    static var tansu: String? { env["TANSU_BIN"] }
    /// PostgreSQL's server binaries.
    static var pgBin: String? {
        let dirs = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        return dirs.sorted { $0.compare($1, options: .numeric) == .orderedAscending }.last.map { "/usr/lib/postgresql/\($0)/bin" }
    }

    /// A free TCP port on 127.0.0.1, never the same twice in a run. Not from the kernel's ephemeral range
    /// (32768-60999), as a port bound to 0 would be: between being picked and being bound by the service it is for,
    /// such a port can be taken by any outgoing connection, an earlier service's to PostgreSQL say, and the service
    /// then cannot listen. Test processes running side by side each pick from a range of their own
    /// (`TEST_PORT_RANGE`, "low-high"), for the same reason.
    static func freePort() -> Int {
        while true {
            let port = Int.random(in: portRange)
            if isFree(port) { return port }
        }
    }

    /// The first of `count` consecutive free ports, all within this process's range, all handed out.
    static func freeRun(of count: Int) throws -> Int {
        for _ in 0..<200 {
            let first = Int.random(in: portRange.lowerBound...(portRange.upperBound - count + 1))
            if (0..<count).allSatisfy({ isFree(first + $0) }) { return first }
        }
        throw TestFailure("no \(count) consecutive free ports in \(portRange)")
    }

    /// Whether `port` was not handed out before and can be bound now; if so it is handed out.
    static func isFree(_ port: Int) -> Bool {
        portsLock.lock()
        let fresh = portsHandedOut.insert(port).inserted
        portsLock.unlock()
        return fresh && canBind(port)
    }

    private static let portRange: ClosedRange<Int> = {
        let bounds = (env["TEST_PORT_RANGE"] ?? "").split(separator: "-").compactMap { Int($0) }
        return bounds.count == 2 && 1024 <= bounds[0] && bounds[0] < bounds[1] && bounds[1] < 32_768 ? bounds[0]...bounds[1] : 20_000...32_000
    }()

    nonisolated(unsafe) private static var portsHandedOut: Set<Int> = []
    private static let portsLock = NSLock()

    private static func canBind(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = UInt16(port).bigEndian
        let len = socklen_t(MemoryLayout<sockaddr_in>.size)
        return withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } } == 0
    }

    /// The stack's Python (its venv, where the PyPI packages are).
    static func python() throws -> String {
        let st = try XCTUnwrap(ProcessInfo.processInfo.environment["SCHEMATHESIS_BIN"], "run the tests with deploy/local/stack test")
        return URL(fileURLWithPath: st).deletingLastPathComponent().appendingPathComponent("python").path
    }

    /// A Python server of the stack's (`deploy/local/<script>`: the mail sink, the push service stand-in) on `port`, or
    /// a free one, once it printed "ready"; closing `input` stops it.
    static func startHelper(_ script: String, port fixed: Int? = nil, arguments: (Int) -> [String]) throws -> (process: Process, input: Pipe, port: Int) {
        let python = try python(), path = root.appendingPathComponent("deploy/local/\(script)").path
        for _ in 0..<5 {
            let port = fixed ?? freePort()
            let server = Process()
            server.executableURL = URL(fileURLWithPath: python)
            server.arguments = [path] + arguments(port)
            let input = Pipe(), output = Pipe()
            server.standardInput = input
            server.standardOutput = output
            server.standardError = FileHandle.nullDevice
            try server.run()
            if String(decoding: output.fileHandleForReading.availableData, as: UTF8.self).hasPrefix("ready") { return (server, input, port) }
            server.terminate()
        }
        throw TestFailure("\(script) did not start")
    }

    /// Polls `condition` every `every` seconds (50 ms) until it holds or `timeout` passes.
    @discardableResult
    static func waitUntil(timeout: TimeInterval, every: TimeInterval = 0.05, _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if try condition() { return true }
            Thread.sleep(forTimeInterval: every)
        }
        return try condition()
    }
}

/// A fresh database for one test case, dropped afterwards: a copy of `template` (which nobody may be connected to
/// meanwhile), by default the one `deploy/local/stack test` applied every service's migrations to; empty without one.
final class TestDatabase {
    let name: String
    let url: String
    private let adminURL: String

    init(adminURL: String = TestEnvironment.adminDatabaseURL, template: String? = TestEnvironment.env["TEST_TEMPLATE_DATABASE"]) throws {
        self.adminURL = adminURL
        name = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16)
        let admin = try Connection(url: adminURL)
        // Copied as files, not written through the write-ahead log (PostgreSQL's default since 15): each copy would add
        // megabytes to the log that every running service's relay reads through, hundreds of times a run.
        try admin.execute("CREATE DATABASE \(unescaped: name)\(unescaped: template.map { " TEMPLATE " + $0 } ?? "") STRATEGY FILE_COPY")
        var components = URLComponents(string: adminURL)!
        components.path = "/" + name
        url = components.string!
    }

    /// A new connection to this database.
    func connect() throws -> Connection { try Connection(url: url) }

    func drop() {
        guard let admin = try? Connection(url: adminURL) else { return }
        // The outbox relays' replication slots keep the database (and WAL) until they are dropped; a slot still read
        // is let go by ending its reader first.
        _ = TestEnvironment.waitUntil(timeout: 5) {
            _ = try? admin.execute("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = $1 AND active", [name])
            _ = try? admin.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND NOT active", [name])
            return (try? admin.first("SELECT count(*)::int AS n FROM pg_replication_slots WHERE database = $1", [name])?["n", as: Int.self]) == 0
        }
        _ = try? admin.execute("DROP DATABASE IF EXISTS \(unescaped: name) WITH (FORCE)")
    }
}

/// A service executable running as a child process, with its stderr kept for failures.
final class ServiceProcess {
    let name: String
    let port: Int
    let process = Process()
    let logURL: URL

    /// `resolver`: a resolv.conf the service sees instead of the system's (bound over it in a mount namespace of its own).
    init(_ name: String, port: Int = TestEnvironment.freePort(), environment: [String: String], arguments: [String] = [],
         resolver: URL? = nil) throws {
        self.name = name
        self.port = port
        let binary = URL(fileURLWithPath: TestEnvironment.binDir).appendingPathComponent(name)
        if let resolver {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
            process.arguments = ["--mount", "sh", "-c", "mount --bind \"$0\" /etc/resolv.conf && exec \"$@\"", resolver.path, binary.path] + arguments
        } else {
            process.executableURL = binary
            process.arguments = arguments
        }
        var env = ProcessInfo.processInfo.environment
        env["PORT"] = String(port)
        env["KAFKA_BROKERS"] = TestEnvironment.brokers
        env["KAFKA_SESSION_TIMEOUT_MS"] = "6000"
        env["LOG_LEVEL"] = "info"
        env["SHUTDOWN_DELAY_SECONDS"] = "0"  // no load balancer to wait for; the drain test sets its own
        env["OPERATOR_TOKEN"] = nil  // a test that wants the operator routes sets its own
        env["SERVICE_TOKEN"] = nil  // likewise the list of revoked sessions (its auth must be the one of AUTH_JWKS_URL)
        env["HTTP_MAX_CONNECTIONS_PER_CLIENT"] = nil  // the stack raises it for load tests; tests see the default
        env["BIND_ADDRESS"] = nil  // likewise the stack's loopback-only address and its gateway as trusted proxy
        env["TRUSTED_PROXIES"] = nil
        env["PUBLIC_BASE_URL"] = nil  // image URLs name the service itself, unless a test puts a gateway in front
        env["MEDIA_URL_KEYS"] = TestEnvironment.mediaURLKeys
        env["MEDIA_STORE"] = TestEnvironment.mediaStore
        for name in ["VAPID_PRIVATE_KEY", "PUSH_ALLOWED_ORIGINS", "STORIES_URL", "CHAT_URL"] { env[name] = nil }  // notify's: a test sets its own
        for (k, v) in environment { env[k] = v }
        process.environment = env
        logURL = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(port)-\(UUID().uuidString.prefix(8)).log")
        FileManager.default.createFile(atPath: logURL.path, contents: nil)
        let handle = try FileHandle(forWritingTo: logURL)
        process.standardError = handle
        process.standardOutput = handle
        try process.run()
    }

    /// Starts `name` and waits until its `/readyz` answers 200.
    /// The six services on `database`, each ready (auth first: the others read its keys).
    static func startAll(database: TestDatabase) throws -> [ServiceProcess] {
        let authPort = TestEnvironment.freePort()
        let environment = ["DATABASE_URL": database.url, "AUTH_JWKS_URL": "http://127.0.0.1:\(authPort)/v1/auth/jwks"]
        let auth = try ServiceProcess("auth", port: authPort, environment: environment)
        var services = [auth]
        do {
            try auth.waitReady()
            for name in ["stories", "chat", "dispatch", "curation", "notify"] {
                services.append(try ServiceProcess.startReady(name, environment: environment))
            }
        } catch {
            services.forEach { _ = $0.stop() }
            throw error
        }
        return services
    }

    static func startReady(_ name: String, port: Int = TestEnvironment.freePort(), environment: [String: String],
                           timeout: TimeInterval = 60) throws -> ServiceProcess {
        let service = try ServiceProcess(name, port: port, environment: environment)
        try service.waitReady(timeout: timeout)
        return service
    }

    func waitReady(timeout: TimeInterval = 60) throws {
        let client = HTTPClient(port: port, timeout: 2)
        let ready = TestEnvironment.waitUntil(timeout: timeout) {
            guard process.isRunning else { return false }
            return (try? client.request("GET", "/readyz"))?.status == 200
        }
        if !ready {
            throw TestFailure("\(name) did not become ready; log:\n\(log.suffix(3000))")
        }
    }

    /// What the process wrote so far.
    var log: String { (try? String(contentsOf: logURL, encoding: .utf8)) ?? "" }

    /// SIGTERM, then wait for the exit; returns the exit status. A service that stopped by itself on a fatal error
    /// (in the tests' debug build, an answer that breaks its route's schema) fails the test that stops it, naming the
    /// error, even when the test itself saw only a closed connection.
    @discardableResult
    func stop(timeout: TimeInterval = 20) -> Int32 {
        // Swift's own `fatalError` line (`File.swift:12: Fatal error: ...`), not a log line quoting a library's.
        let fatal = log.split(separator: "\n").filter { !$0.hasPrefix("{") && $0.contains(".swift:") && $0.contains(": Fatal error:") }
        if !fatal.isEmpty { XCTFail("\(name) stopped: \(fatal.joined(separator: "\n"))") }
        guard process.isRunning else { return process.terminationStatus }
        APIClient.closeIdle(port: port)
        process.terminate()
        if !TestEnvironment.waitUntil(timeout: timeout, { !process.isRunning }) {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        return process.terminationStatus
    }

    /// SIGKILL, as a crash would.
    func kill9() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// A failing test has printed the log by now: the file goes. The services a test class keeps for all its tests
    /// live until the run ends; `deploy/local/stack test` removes their logs with its temporary directory.
    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        try? FileManager.default.removeItem(at: logURL)
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
