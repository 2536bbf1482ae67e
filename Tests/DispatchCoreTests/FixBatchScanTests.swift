import Foundation
@testable import DispatchCore
@testable import Web
import XCTest

/// The fleet's batches have a fast path (`FleetFixesBody.scan`) beside the general one (parse, schema, decode).
/// Whatever the fast path takes, the general one must read alike: it is tried on the usual bodies, bodies in every
/// form JSON allows, bodies the schema refuses, and thousands of cut and mutated ones.
final class FixBatchScanTests: XCTestCase {
    private func general(_ bytes: [UInt8]) -> FleetFixesBody? {
        guard let value = try? JSONParser.parse(bytes), case .object = value,
              let valid = try? FleetFixesBody.schema.validate(value, path: "") else { return nil }
        return try? FleetFixesBody(from: TreeDecoder(valid, path: []))
    }

    private func describe(_ body: FleetFixesBody?) -> String {
        body.map { $0.fixes.map { f in
            "\(f.courierId) \(f.lat.bitPattern) \(f.lon.bitPattern) \(String(describing: f.heading?.bitPattern)) "
                + "\(String(describing: f.speedMps?.bitPattern)) \(f.at ?? "-")"
        }.joined(separator: "\n") } ?? "refused"
    }

    /// Checks one body: the fast path takes it only if the general path reads the same; returns whether it took it.
    @discardableResult
    private func check(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> Bool {
        let bytes = Array(text.utf8)
        guard let fast = FleetFixesBody.scanned(bytes) else { return false }
        XCTAssertEqual(describe(fast), describe(general(bytes)), "for \(text.prefix(300))", file: file, line: line)
        return true
    }

    private let id = "0b7e4a8c-1f0d-4c55-9a39-6c2a1f3e2b10"

    func testTheUsualBodiesTakeTheFastPathAndReadAsTheGeneralOne() {
        let usual = [
            #"{"fixes":[{"courierId":"\#(id)","lat":44.427039182340005,"lon":26.103,"heading":181.5}]}"#,
            #"{"fixes":[{"courierId":"\#(id)","lat":-90,"lon":180,"heading":null,"speedMps":0,"at":"2026-12-04T08:00:00Z"}]}"#,
            " {\n \"fixes\" : [ { \"lon\" : 1e1 , \"lat\" : -0.5E-3 , \"courierId\" : \"\(id.uppercased())\" } ] } \n",
            #"{"fixes":[{"courierId":"\#(id)","lat":1,"lon":2,"speedMps":null,"at":null}]}"#,
            #"{"fixes":[{"courier\u0049d":"\#(id)","lat":1,"lon":2}]}"#,
            "{\"fixes\":[" + Array(repeating: #"{"courierId":"\#(id)","lat":44.4,"lon":26.1,"heading":90}"#, count: 1000)
                .joined(separator: ",") + "]}",
        ]
        for body in usual { XCTAssertTrue(check(body), "the fast path refused \(body.prefix(200))") }
    }

    func testWhatTheSchemaRefusesIsLeftToTheGeneralPath() {
        let refused = [
            #"{"fixes":[]}"#, #"{"fixes":{}}"#, #"{"fixes":[{}]}"#, #"{}"#, #"[]"#, "",
            #"{"fixes":[{"courierId":"\#(id)","lat":90.0000001,"lon":0}]}"#,
            #"{"fixes":[{"courierId":"\#(id)","lat":1,"lon":-180.5}]}"#,
            #"{"fixes":[{"courierId":"\#(id)","lat":1,"lon":1,"heading":361}]}"#,
            #"{"fixes":[{"courierId":"\#(id)","lat":1,"lon":1,"speedMps":-1}]}"#,
            #"{"fixes":[{"courierId":"\#(id)","lat":1,"lon":1,"at":"yesterday"}]}"#,
            #"{"fixes":[{"courierId":"nope","lat":1,"lon":1}]}"#,
            #"{"fixes":[{"courierId":"\#(id)","lat":"1","lon":1}]}"#,
            #"{"fixes":[{"courierId":"\#(id)","lat":1}]}"#,
            #"{"fixes":[{"courierId":"\#(id)","lat":1,"lon":1,"extra":1}]}"#,
            #"{"fixes":[{"courierId":"\#(id)","lat":1,"lon":1}],"other":1}"#,
            #"{"fixes":[{"courierId":"\#(id)","lat":1,"lon":1}]} x"#,
            #"{"fixes":[{"courierId":"\#(id)","lat":01,"lon":1}]}"#,
            #"{"fixes":[{"courierId":"\#(id)","lat":1,"lon":1},]}"#,
            #"{"fixes":[{"courierId":null,"lat":1,"lon":1}]}"#,
            "{\"fixes\":[" + Array(repeating: #"{"courierId":"\#(id)","lat":1,"lon":1}"#, count: 1001).joined(separator: ",") + "]}",
        ]
        for body in refused {
            XCTAssertFalse(check(body), "the fast path took \(body.prefix(200))")
            XCTAssertNil(general(Array(body.utf8)), "the general path took \(body.prefix(200))")
        }
        // A repeated member: the general path takes the later one; the fast path leaves it to it.
        XCTAssertFalse(check(#"{"fixes":[{"courierId":"\#(id)","lat":1,"lon":1,"lat":2}]}"#))
    }

    func testCutAndMutatedBodiesReadAlikeOrGoTheGeneralWay() {
        let base = Array(#"{"fixes":[{"courierId":"\#(id)","lat":44.427,"lon":26.1,"heading":1.5,"speedMps":3,"at":"2026-12-04T08:00:00.5+02:00"},{"lat":-1e-2,"courierId":"\#(id)","lon":0}]}"#.utf8)
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array(#"{}[]:,"\ 0123456789.eE+-nulltrfa"#.utf8)
        var taken = 0
        for cut in 0..<base.count { if check(String(decoding: base[..<cut], as: UTF8.self)) { taken += 1 } }
        XCTAssertEqual(taken, 0, "a cut body is never complete")
        for _ in 0..<20_000 {
            var bytes = base
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                let at = Int.random(in: 0..<bytes.count, using: &generator)
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: bytes[at] = alphabet.randomElement(using: &generator)!
                case 1: bytes.insert(alphabet.randomElement(using: &generator)!, at: at)
                default: bytes.remove(at: at)
                }
            }
            if let fast = FleetFixesBody.scanned(bytes) {
                XCTAssertEqual(describe(fast), describe(general(bytes)), String(decoding: bytes, as: UTF8.self))
            }
        }
    }
}
