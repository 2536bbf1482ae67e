import Foundation
import XCTest

/// No Docker engine runs here, so the container files are checked statically: they must agree with the package
/// and with the conventions' ports and settings.
final class DeploymentTests: XCTestCase {
    let root = TestEnvironment.root
    let ports = ["auth": 8081, "stories": 8082, "chat": 8083, "dispatch": 8084, "curation": 8085]

    func read(_ path: String) throws -> String { try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8) }

    /// The services the package builds (executable products that are services).
    func services() throws -> [String] {
        let package = try read("Package.swift")
        return ports.keys.filter { package.contains(".executable(name: \"\($0)\"") }.sorted()
    }

    func testComposeRunsEveryServiceWithItsSettings() throws {
        let compose = try YAMLSubset.parse(try read("docker-compose.yml")) as? [String: Any]
        let defined = compose?["services"] as? [String: Any] ?? [:]
        XCTAssertNotNil(defined["postgres"]); XCTAssertNotNil(defined["kafka"])
        XCTAssertFalse(try services().isEmpty)
        for name in try services() {
            guard let service = defined[name] as? [String: Any] else { XCTFail("compose has no \(name)"); continue }
            let build = service["build"] as? [String: Any]
            XCTAssertEqual((build?["args"] as? [String: Any])?["SERVICE"] as? String, name)
            let dockerfile = build?["dockerfile"] as? String ?? ""
            XCTAssertTrue(FileManager.default.fileExists(atPath: root.appendingPathComponent(dockerfile).path), dockerfile)
            let env = service["environment"] as? [String: Any] ?? [:]
            XCTAssertEqual(env["PORT"] as? String, String(ports[name]!))
            for key in ["DATABASE_URL", "KAFKA_BROKERS", "AUTH_JWKS_URL"] { XCTAssertNotNil(env[key], "\(name) \(key)") }
            XCTAssertTrue((env["DATABASE_URL"] as? String ?? "").contains("@postgres:5432/"))
            XCTAssertEqual(env["KAFKA_BROKERS"] as? String, "kafka:9092")
            XCTAssertEqual(service["ports"] as? [String], ["\(ports[name]!):\(ports[name]!)"])
            let health = (service["healthcheck"] as? [String: Any])?["test"] as? String ?? ""
            XCTAssertTrue(health.contains("/readyz"), "\(name) health check uses readiness")
            let depends = service["depends_on"] as? [String: Any] ?? [:]
            for dependency in ["postgres", "kafka"] {
                XCTAssertEqual((depends[dependency] as? [String: Any])?["condition"] as? String, "service_healthy", "\(name) → \(dependency)")
            }
        }
    }

    func testTheDockerfileInstallsWhatThePackageLinks() throws {
        let dockerfile = try read("deploy/docker/Dockerfile")
        let package = try read("Package.swift")
        let providers = package.matches(of: /system\("\w+", "[\w-]+", "([\w-]+)"\)/).map { String($0.1) }
        XCTAssertEqual(providers.count, 5)
        for provider in providers { XCTAssertTrue(dockerfile.contains(provider), "build stage lacks \(provider)") }
        for runtime in ["libpq5", "librdkafka1", "libmicrohttpd12", "libssl3", "libargon2-1"] {
            XCTAssertTrue(dockerfile.contains(runtime), "runtime stage lacks \(runtime)")
        }
        XCTAssertTrue(dockerfile.contains("USER 10001"), "runs as a non-root user")
        XCTAssertTrue(dockerfile.contains("ENTRYPOINT"))
        XCTAssertTrue(dockerfile.contains("--static-swift-stdlib"))
    }

    func testTheLocalStackStartsEveryService() throws {
        let stack = try read("deploy/local/stack")
        let line = stack.split(separator: "\n").first { $0.hasPrefix("SERVICES=(") } ?? ""
        for name in try services() { XCTAssertTrue(line.contains(name), "stack does not start \(name)") }
        let readme = try read("README.md")
        XCTAssertTrue(readme.contains("deploy/local/stack up"))
        XCTAssertTrue(readme.contains("deploy/local/stack test"))
        XCTAssertTrue(try read(".ci/run").contains("deploy/local/stack test"))
    }

    func testTheYAMLReaderReadsWhatComposeFilesUse() throws {
        let doc = try YAMLSubset.parse("""
            # comment
            a:
              b: "quoted"   # trailing
              c:
                - one
                - "two"
              d: ["CMD", "x"]
            e: plain text
            """) as? [String: Any]
        let a = doc?["a"] as? [String: Any]
        XCTAssertEqual(a?["b"] as? String, "quoted")
        XCTAssertEqual(a?["c"] as? [String], ["one", "two"])
        XCTAssertEqual(a?["d"] as? String, #"["CMD", "x"]"#)
        XCTAssertEqual(doc?["e"] as? String, "plain text")
        XCTAssertThrowsError(try YAMLSubset.parse("a:\n\tb: tab"))
    }
}

/// Reads the block-style subset of YAML that compose files use: maps, lists of scalars, scalars, comments.
/// Flow collections stay as their text.
enum YAMLSubset {
    struct Line { let indent: Int; let text: String }

    static func parse(_ text: String) throws -> Any {
        var lines: [Line] = []
        for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if raw.contains("\t") { throw TestFailure("tabs are not allowed in YAML") }
            let stripped = stripComment(String(raw))
            guard !stripped.trimmingCharacters(in: .whitespaces).isEmpty else { continue }
            let indent = stripped.prefix { $0 == " " }.count
            lines.append(Line(indent: indent, text: stripped.trimmingCharacters(in: .whitespaces)))
        }
        var index = 0
        return try block(lines, &index, indent: lines.first?.indent ?? 0)
    }

    static func stripComment(_ line: String) -> String {
        var quote: Character?
        var out = ""
        for (i, c) in line.enumerated() {
            if let q = quote { if c == q { quote = nil } } else if c == "\"" || c == "'" { quote = c }
            else if c == "#" && (i == 0 || line[line.index(line.startIndex, offsetBy: i - 1)] == " ") { break }
            out.append(c)
        }
        return out.replacingOccurrences(of: "\\s+$", with: "", options: .regularExpression)
    }

    static func scalar(_ text: String) -> String {
        if text.count >= 2, let f = text.first, f == text.last, f == "\"" || f == "'" { return String(text.dropFirst().dropLast()) }
        return text
    }

    static func block(_ lines: [Line], _ i: inout Int, indent: Int) throws -> Any {
        if lines[i].text.hasPrefix("- ") || lines[i].text == "-" {
            var list: [Any] = []
            while i < lines.count, lines[i].indent == indent, lines[i].text.hasPrefix("-") {
                list.append(scalar(String(lines[i].text.dropFirst(1)).trimmingCharacters(in: .whitespaces)))
                i += 1
            }
            return list
        }
        var map: [String: Any] = [:]
        while i < lines.count, lines[i].indent == indent {
            let line = lines[i].text
            guard let colon = line.firstIndex(of: ":") else { throw TestFailure("expected key: value in \(line)") }
            let key = scalar(String(line[..<colon]))
            let rest = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            i += 1
            if rest.isEmpty {
                if i < lines.count, lines[i].indent > indent {
                    map[key] = try block(lines, &i, indent: lines[i].indent)
                } else if i < lines.count, lines[i].indent == indent, lines[i].text.hasPrefix("- ") {
                    map[key] = try block(lines, &i, indent: indent)
                } else {
                    map[key] = NSNull()
                }
            } else {
                map[key] = scalar(rest)
            }
        }
        if i < lines.count, lines[i].indent > indent { throw TestFailure("bad indentation at \(lines[i].text)") }
        return map
    }
}
