import Foundation
import XCTest

/// Runs a command to completion; throws with its output when it fails.
@discardableResult
func run(_ arguments: [String]) throws -> String {
    let (status, output) = try runForStatus(arguments)
    guard status == 0 else { throw TestFailure("\(arguments.joined(separator: " ")) failed: \(output)") }
    return output
}

/// Runs a command to completion: its exit status and what it printed (standard output and error together).
func runForStatus(_ arguments: [String]) throws -> (status: Int32, output: String) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    p.arguments = arguments
    // A file, not a pipe: a server started by the command inherits the descriptor and would hold a pipe open.
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("run-\(UUID().uuidString).out")
    FileManager.default.createFile(atPath: file.path, contents: nil)
    defer { try? FileManager.default.removeItem(at: file) }
    let handle = try FileHandle(forWritingTo: file)
    p.standardOutput = handle
    p.standardError = handle
    try p.run()
    p.waitUntilExit()
    try? handle.close()
    return (p.terminationStatus, (try? String(contentsOf: file, encoding: .utf8)) ?? "")
}

/// A Tansu broker of the test's own, to stop and start without disturbing other tests.
final class PrivateBroker {
    let port = TestEnvironment.freePort()
    var address: String { "127.0.0.1:\(port)" }
    private var process: Process?

    init() throws {
        guard TestEnvironment.tansu != nil else { throw TestFailure("TANSU_BIN is not set: run the tests with deploy/local/stack test") }
        try start()
    }

    /// Starts the broker. After a stop the port may sit in TIME_WAIT for up to a minute, and Tansu does not
    /// reuse the address, so a start retries until the port binds.
    func start() throws {
        let deadline = Date().addingTimeInterval(120)
        while Date() < deadline {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: TestEnvironment.tansu!)
            p.arguments = ["broker", "--storage-engine", "memory://tansu/", "--listener-url", "tcp://\(address)",
                           "--advertised-listener-url", "tcp://\(address)"]
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            try p.run()
            process = p
            TestEnvironment.waitUntil(timeout: 3) { !p.isRunning || (try? HTTPProbe.tcpOpen(port: port)) == true }
            if p.isRunning { return }
            Thread.sleep(forTimeInterval: 1)
        }
        throw TestFailure("the private broker could not bind port \(port)")
    }

    /// Kills the broker: it loses every topic and offset, as Tansu does on a restart.
    func stop() {
        guard let p = process, p.isRunning else { return }
        p.terminate()
        p.waitUntilExit()
    }

    /// Kills the broker with SIGKILL, as a crash would, in the middle of whatever it was doing.
    func kill9() {
        guard let p = process, p.isRunning else { return }
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
    }

    /// Freezes the broker (SIGSTOP): connections stay open but nothing answers.
    func pause() { if let p = process { kill(p.processIdentifier, SIGSTOP) } }

    /// Thaws a paused broker, data intact.
    func resume() { if let p = process { kill(p.processIdentifier, SIGCONT) } }
}

/// A PostgreSQL cluster of the test's own, to stop and start without disturbing other tests.
final class PrivateCluster {
    let port = TestEnvironment.freePort()
    let directory = "/tmp/pgtest-\(UUID().uuidString.prefix(8))"
    var url: String { "postgres://postgres@127.0.0.1:\(port)/postgres" }
    private let bin: String

    init() throws {
        guard let bin = TestEnvironment.pgBin else { throw TestFailure("PostgreSQL server binaries not found") }
        self.bin = bin
        try run(["install", "-d", "-o", "postgres", "-g", "postgres", directory])
        try run(["runuser", "-u", "postgres", "--", "\(bin)/initdb", "-D", "\(directory)/data", "-U", "postgres",
                 "--auth=trust", "-E", "UTF8", "--no-locale"])
        try startServer()
    }

    func startServer() throws {
        // Through Python, whose subprocess closes inherited descriptors: Foundation's Process watches a socket
        // that the daemonised server would otherwise inherit and hold open, so the wait would never end.
        try run(["python3", "-c", "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))","runuser", "-u", "postgres", "--", "\(bin)/pg_ctl", "-D", "\(directory)/data", "-l", "\(directory)/log", "-w",
                 "-o", "-p \(port) -c listen_addresses=127.0.0.1 -k \(directory)", "start"])
    }

    func stopServer() throws {
        try run(["runuser", "-u", "postgres", "--", "\(bin)/pg_ctl", "-D", "\(directory)/data", "-m", "fast", "-w", "stop"])
    }

    func stop() {
        try? stopServer()
        _ = try? run(["rm", "-rf", directory])
    }
}

enum HTTPProbe {
    static func tcpOpen(port: Int) throws -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }
}
