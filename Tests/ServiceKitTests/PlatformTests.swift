import Foundation
import HTTP
import Models
import Postgres
import Runtime
import ServiceKit
import Synchronization
import Web
import XCTest

final class MigrationOrderTests: XCTestCase {
    func testMigrationsApplyInVersionOrder() throws {
        let ordered = try Migrator.ordered([Migration(3, "c", ""), Migration(1, "a", ""), Migration(2, "b", "")])
        XCTAssertEqual(ordered.map(\.version), [1, 2, 3])
    }

    func testDuplicateOrInvalidVersionsAreRefused() {
        XCTAssertThrowsError(try Migrator.ordered([Migration(1, "a", ""), Migration(1, "b", "")])) {
            XCTAssertEqual($0 as? MigrationError, .duplicateVersion(1))
        }
        XCTAssertThrowsError(try Migrator.ordered([Migration(0, "a", "")])) { XCTAssertEqual($0 as? MigrationError, .invalidVersion(0)) }
    }
}

/// A service that cannot leave a call at once (a connection attempt to an unreachable database, a broker's request
/// with its own timeout) must not hold back the others' stop: all are asked together, then each is waited for.
final class ServiceGroupTests: XCTestCase {
    func testServicesStopTogetherSoOneBlockedCallHoldsBackNoOther() {
        let group = ServiceGroup(logger: Logger(service: "test", minimum: .error)) { _, _ in }
        // Each, once asked, stays in its call until all three were asked: asked one after another, the first would
        // hold the others back past the deadline.
        let asked = Mutex(0), allAsked = Gate(), finished = Mutex(0)
        for name in ["a", "b", "c"] {
            group.start(Job(name) { cancellation in
                cancellation.wait()  // until asked to stop
                if asked.withLock({ $0 += 1; return $0 }) == 3 { allAsked.open() }
                _ = allAsked.wait(until: Date().addingTimeInterval(10))
                finished.withLock { $0 += 1 }
            })
        }
        XCTAssertEqual(group.stop(deadline: Date().addingTimeInterval(3)), [], "every one stopped by the deadline")
        XCTAssertTrue(allAsked.isOpen, "the three were asked together")
        XCTAssertEqual(finished.withLock { $0 }, 3, "each was waited for")
    }
}

final class ConfigTests: XCTestCase {
    func load(_ env: [String: String]) throws -> ServiceConfig {
        try ServiceConfig.load(service: "auth", defaultPort: 8081, environment: Environment(env))
    }

    func testPortZeroAsksForAnyFreePort() throws {
        XCTAssertEqual(try load(["PORT": "0"]).port, 0, "in-process tests and tools bind where the system says")
    }

    func testDefaultsWorkLocally() throws {
        let c = try load([:])
        XCTAssertEqual(c.port, 8081)
        XCTAssertEqual(c.kafkaBrokers, "127.0.0.1:9092")
        XCTAssertTrue(c.databaseURL.hasPrefix("postgres://"))
    }

    func testEachBadSettingIsNamed() {
        for (name, value) in [("PORT", "65536"), ("PORT", "http"), ("HTTP_THREADS", "-3"), ("DB_POOL_SIZE", "many"),
                              ("DATABASE_URL", "localhost"), ("KAFKA_BROKERS", "a:b"), ("LOG_LEVEL", "chatty"),
                              ("AUTH_JWKS_URL", "ftp://x"), ("JWT_PUBLIC_KEY", "short"), ("SHUTDOWN_TIMEOUT_SECONDS", "0"),
                              ("OUTBOX_RETENTION_HOURS", "721"), ("TRUSTED_PROXIES", "10.0.0.0/33"),
                              ("TRUSTED_PROXIES", "gateway"), ("TRUSTED_PROXIES", "10.0.0.1/x")] {
            XCTAssertThrowsError(try load([name: value])) { error in
                XCTAssertEqual((error as? ConfigError)?.variable, name)
                XCTAssertTrue("\(error)".contains(name))
            }
        }
    }
}

final class TrustedProxyTests: XCTestCase {
    func testRangesNameAGatewayWhosePodsHaveNoFixedAddress() throws {
        let proxies = try ServiceConfig.load(service: "auth", defaultPort: 8081,
                                             environment: Environment(["TRUSTED_PROXIES": "172.30.80.80, 10.244.0.0/16,fd00::/8"])).trustedProxies
        for inside in ["172.30.80.80", "10.244.0.1", "10.244.255.254", "fd00::1", "fdff:1::2"] {
            XCTAssertTrue(proxies.contains(inside), inside)
        }
        for outside in ["172.30.80.81", "10.245.0.1", "10.243.255.255", "fe00::1", "::ffff:10.244.0.1x", "", "10.244.0.0/16"] {
            XCTAssertFalse(proxies.contains(outside), outside)
        }
        let oneBit: AddressSet = ["128.0.0.0/1"]
        XCTAssertTrue(oneBit.contains("200.1.2.3"))
        XCTAssertFalse(oneBit.contains("127.255.255.255"))
        XCTAssertTrue((["0.0.0.0/0"] as AddressSet).contains("8.8.8.8"))
        XCTAssertFalse((["0.0.0.0/0"] as AddressSet).contains("::1"), "an IPv4 range holds no IPv6 address")
    }

    func testTheClientIsTheLastAddressBeforeATrustedRange() {
        let proxies: AddressSet = ["10.244.0.0/16"]
        func client(peer: String, forwarded: String) -> String {
            Request(method: "GET", path: "/", headers: ["X-Forwarded-For": forwarded], remoteAddress: peer)
                .clientAddress(trustedProxies: proxies)
        }
        XCTAssertEqual(client(peer: "10.244.3.7", forwarded: "6.6.6.6, 203.0.113.9, 10.244.1.2"), "203.0.113.9")
        XCTAssertEqual(client(peer: "192.0.2.1", forwarded: "203.0.113.9"), "192.0.2.1", "an untrusted peer names itself")
    }
}

final class TimestampTests: XCTestCase {
    func testFormatIsRFC3339UTCWithMilliseconds() {
        XCTAssertEqual(Timestamp.format(Date(timeIntervalSince1970: 1_796_000_000.1234)), "2026-11-30T00:53:20.123Z")
        XCTAssertEqual(Timestamp.format(Date(timeIntervalSince1970: 0)), "1970-01-01T00:00:00.000Z")
    }

    func testParseAcceptsOffsetsAndRejectsNonsense() {
        XCTAssertEqual(Timestamp.parse("2026-11-30T01:53:20+01:00")?.timeIntervalSince1970, 1_796_000_000)
        XCTAssertEqual(Timestamp.parse("2026-11-30T00:53:20.5Z")?.timeIntervalSince1970, 1_796_000_000.5)
        for bad in ["", "2026-11-30", "2026-02-31T00:00:00Z", "2026-11-30T25:00:00Z", "2026-11-30T00:00:00", "yesterday",
                    "2026-11-30T00:00:00Zjunk"] {
            XCTAssertNil(Timestamp.parse(bad), bad)
        }
    }

    func testUUIDv7IsTimeOrderedAndVersioned() {
        let a = UUID.v7(at: Date(timeIntervalSince1970: 1000))
        let b = UUID.v7(at: Date(timeIntervalSince1970: 1001))
        XCTAssertLessThan(a.lowercased, b.lowercased)
        XCTAssertEqual(Array(a.lowercased)[14], "7")
        XCTAssertTrue("89ab".contains(Array(a.lowercased)[19]))
    }
}

final class MetricsTests: XCTestCase {
    func testRequestsRenderAsAPrometheusHistogram() {
        let m = Metrics()
        m.observeRequest(method: "GET", route: "/v1/users/me", status: 200, seconds: 0.003)
        m.observeRequest(method: "GET", route: "/v1/users/me", status: 200, seconds: 0.2)
        m.increment("outbox_published_events_total", by: 2, help: "Events published.")
        m.addGauges(help: ["db_pool_connections": "Pooled connections."]) { [("db_pool_connections", "state=\"idle\"", 3)] }
        let text = m.render()
        XCTAssertTrue(text.contains(#"http_server_request_duration_seconds_bucket{method="GET",route="/v1/users/me",status="200",le="0.005"} 1"#))
        XCTAssertTrue(text.contains(#"http_server_request_duration_seconds_count{method="GET",route="/v1/users/me",status="200"} 2"#))
        XCTAssertTrue(text.contains("outbox_published_events_total 2.0"))
        XCTAssertTrue(text.contains(#"db_pool_connections{state="idle"} 3.0"#))
        XCTAssertTrue(text.contains("# HELP db_pool_connections Pooled connections.\n# TYPE db_pool_connections gauge"))
    }

    /// Whatever a label value holds, each sample stays on one line of the text format.
    func testLabelValuesAreEscaped() {
        let m = Metrics()
        m.observeRequest(method: "GET", route: "/a\\b\"c\nd", status: 404, seconds: 0.001)
        let lines = m.render().split(separator: "\n").filter { $0.hasPrefix("http_server_request_duration_seconds_count") }
        XCTAssertEqual(lines, [#"http_server_request_duration_seconds_count{method="GET",route="/a\\b\"c\nd",status="404"} 1"#])
    }
}

final class CivilDateTests: XCTestCase {
    /// From 1583 (Foundation's calendar is Julian before the Gregorian reform; RFC 3339 is proleptic Gregorian) to 9999.
    func testHandFormattingAgreesWithTheCalendarAcrossCenturiesAndLeapDays() {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        for days in stride(from: -141_000, through: 2_900_000, by: 997) + [0, -1, 11_016, 11_017, 19_417, 20_512] {
            let date = Date(timeIntervalSince1970: Double(days) * 86_400 + 3723.5)
            let c = calendar.dateComponents([.year, .month, .day], from: date)
            let expected = String(format: "%04d-%02d-%02dT01:02:03.500Z", c.year!, c.month!, c.day!)
            XCTAssertEqual(Timestamp.format(date), expected, "day \(days)")
        }
    }
}

/// What PostgreSQL sends as text, read by hand (not through Foundation's parsers).
final class PostgresTextTests: XCTestCase {
    func testTimestampsReadBackWhatWasWrittenAcrossCenturiesAndLeapDays() {
        for days in stride(from: -141_000, through: 2_900_000, by: 997) + [0, -1, 11_016, 11_017, 19_417, 20_512] {
            let date = Date(timeIntervalSince1970: Double(days) * 86_400 + 3723.123456)
            let read = read(date.postgresText, as: Date.self)
            XCTAssertEqual(read?.timeIntervalSince1970 ?? .nan, date.timeIntervalSince1970, accuracy: 0.000_001, date.postgresText)
        }
        XCTAssertEqual(Date(timeIntervalSince1970: 1_796_004_000.5).postgresText, "2026-11-30 02:00:00.500000+00")
        XCTAssertEqual(Date(timeIntervalSince1970: -0.25).postgresText, "1969-12-31 23:59:59.750000+00")
        XCTAssertEqual(read("2026-11-30 02:00:00+00", as: Date.self)?.timeIntervalSince1970, 1_796_004_000)
        XCTAssertEqual(read("2026-11-30T02:00:00.5Z", as: Date.self)?.timeIntervalSince1970, 1_796_004_000.5)
        for bad in ["", "infinity", "2026-11-30 02:00:00+01", "2026-13-30 02:00:00+00", "2026-11-30 02:00:00", "2026/11/30 02:00:00+00"] {
            XCTAssertNil(read(bad, as: Date.self), bad)
        }
    }

    func testUUIDsReadInEitherCaseAndNothingElse() {
        let id = UUID()
        for other in [id, UUID(uuid: (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 255))] {
            XCTAssertEqual(other.lowercased, other.uuidString.lowercased(), "the kit's own formatting")
        }
        XCTAssertEqual(UUID(postgresText: id.uuidString.lowercased()), id)
        XCTAssertEqual(UUID(postgresText: id.uuidString), id)
        for bad in ["", String(id.uuidString.dropLast()), id.uuidString.replacingOccurrences(of: "-", with: "_"), "g" + id.uuidString.dropFirst()] {
            XCTAssertNil(UUID(postgresText: bad), bad)
        }
    }

    func testIntegersReadTheirWholeRangeAndNothingElse() {
        for value in [0, 1, -1, 42, -907, Int64.max, Int64.min, Int64.max - 1, Int64.min + 1] {
            XCTAssertEqual(read(String(value), as: Int64.self), value)
            XCTAssertEqual(read(String(value), as: Int.self), Int(value))
        }
        for bad in ["", "-", "+1", "1.0", "1e3", " 1", "1 ", "9223372036854775808", "-9223372036854775809", "99999999999999999999", "0x10"] {
            XCTAssertNil(read(bad, as: Int64.self), bad)
        }
        XCTAssertEqual(read("t", as: Bool.self), true)
        XCTAssertEqual(read("f", as: Bool.self), false)
        XCTAssertNil(read("yes", as: Bool.self))
        XCTAssertEqual(read("-12.5", as: Double.self), -12.5)
        XCTAssertEqual(read("\\x00ff10", as: ByteArray.self)?.bytes, [0, 255, 16])
        XCTAssertEqual(read("Ünïcode ✓", as: String.self), "Ünïcode ✓")
    }
}

/// A column's text as a result holds it, read as `T`.
private func read<T: PostgresDecodable>(_ text: String, as type: T.Type) -> T? {
    var text = text
    return text.withUTF8 { T(postgresBytes: $0) }
}

/// The kit's JSON writer against Foundation's encoder: the same JSON for every shape the services encode.
final class JSONWriterTests: XCTestCase {
    enum Colour: String, Codable { case red, blue }
    struct Empty: Codable {}
    struct Inner: Codable, Equatable { let name: String; let tags: [String]; let note: String? }
    struct Manual: Encodable {
        func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: AnyKey.self)
            var nested = c.nestedUnkeyedContainer(forKey: AnyKey("list"))
            try nested.encode(1)
            var deeper = nested.nestedContainer(keyedBy: AnyKey.self)
            try deeper.encode(true, forKey: AnyKey("deep"))
            try c.encodeNil(forKey: AnyKey("nothing"))
            try c.encode(Int8(-3), forKey: AnyKey("small"))
        }
    }
    struct AnyKey: CodingKey {
        let stringValue: String
        init(_ s: String) { stringValue = s }
        init?(stringValue: String) { self.stringValue = stringValue }
        var intValue: Int? { nil }
        init?(intValue: Int) { nil }
    }
    struct Everything: Encodable {
        let text = "quote \" backslash \\ slash / newline \n tab \t bell \u{07} é 😀"
        let count = 42
        let negative: Int64 = -7
        let unsigned: UInt16 = 65_535
        let ratio = 0.25
        let whole = 3.0
        let tiny = 1e-7
        let flag = false
        let missing: String? = nil
        let present: Int? = 5
        let colour = Colour.blue
        let empty = Empty()
        let items = [Inner(name: "a", tags: [], note: nil), Inner(name: "b", tags: ["x", "y"], note: "n")]
        let grid = [[1, 2], [], [3]]
        let map = ["k": [Inner(name: "c", tags: ["z"], note: nil)]]
        let bytes = Data([0, 1, 254, 255])
        let link = URL(string: "https://example.com/a/b?c=d")!
        let manual = Manual()
        let nothingInside: [Empty] = [Empty(), Empty()]
    }

    func same<T: Encodable>(_ value: T, file: StaticString = #filePath, line: UInt = #line) throws {
        let ours = try JSON.encode(value)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        let theirs = try encoder.encode(value)
        let a = try JSONSerialization.jsonObject(with: Data(ours), options: .fragmentsAllowed)
        let b = try JSONSerialization.jsonObject(with: theirs, options: .fragmentsAllowed)
        XCTAssertEqual(a as? NSObject, b as? NSObject, String(decoding: ours, as: UTF8.self), file: file, line: line)
    }

    func testEveryShapeEncodesAsFoundationWould() throws {
        try same(Everything())
        try same([Inner(name: "top", tags: ["level"], note: nil)])
        try same("a top-level string")
        try same(Empty())
        try same([String: Int]())
        XCTAssertEqual(String(decoding: try JSON.encode(Inner(name: "n", tags: ["t"], note: nil)), as: UTF8.self),
                       #"{"name":"n","tags":["t"]}"#, "keys in declaration order, nil optionals left out, no spaces")
        XCTAssertThrowsError(try JSON.encode([Double.nan]), "NaN is not JSON")
    }
}

final class JSONOutputTests: XCTestCase {
    /// UUIDs and dates go into a response in place, not through a string: they read back as their text forms.
    func testUUIDsAndDatesWrittenInPlaceReadAsTheirText() throws {
        let ids = (0..<50).map { _ in UUID() } + [UUID.v7()]
        let dates = stride(from: -141_000, through: 2_900_000, by: 9_973).map { Date(timeIntervalSince1970: Double($0) * 86_400 + 3723.5) }
        var json = JSONOutput()
        json.array { json in
            for id in ids { id.write(to: &json) }
            for date in dates { date.write(to: &json) }
        }
        let read = try JSONSerialization.jsonObject(with: Data(json.bytes)) as? [String]
        XCTAssertEqual(read, ids.map { $0.uuidString.lowercased() } + dates.map(Timestamp.format))
    }
}

/// Where the kit's JSON differs from Foundation's on purpose: ids and times as the API and the events carry them.
final class JSONWriterIdsAndTimesTests: XCTestCase {
    struct Stamped: Codable, Equatable { let id: UUID; let at: Date; let seen: Date? }

    func testIdsAreLowerCaseAndTimesRFC3339AndTheyReadBack() throws {
        let value = Stamped(id: UUID(uuidString: "0190A0B0-C0D0-7000-8000-00000000ABCD")!,
                            at: Date(timeIntervalSince1970: 1_796_000_000.25), seen: nil)
        let text = String(decoding: try JSON.encode(value), as: UTF8.self)
        XCTAssertEqual(text, #"{"id":"0190a0b0-c0d0-7000-8000-00000000abcd","at":"2026-11-30T00:53:20.250Z"}"#)
        XCTAssertEqual(try Timestamp.decoder().decode(Stamped.self, from: Data(text.utf8)), value)
    }
}
