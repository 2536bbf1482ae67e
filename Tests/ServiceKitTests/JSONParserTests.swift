@testable import Web
import Foundation
import XCTest

/// The kit's body parser against Foundation's: the same values from valid JSON, a refusal for everything else.
final class JSONParserTests: XCTestCase {
    /// The parsed value as Foundation would give it, for comparison.
    func foundation(_ v: JSONValue) -> NSObject {
        switch v {
        case .null: return NSNull()
        case .bool(let b): return NSNumber(value: b)
        case .number(let d): return NSNumber(value: d)
        case .string(let s): return s as NSString
        case .array(let a): return a.map(foundation) as NSArray
        case .object(let o): return o.mapValues(foundation) as NSDictionary
        }
    }

    func testValidJSONParsesAsFoundationParsesIt() throws {
        let valid = [
            #"{}"#, #"[]"#, #" { "a" : [ 1 , -2.5e3 , 0 , 0.125 , 1E+2 , true , false , null ] } "#,
            #"{"text":"quote \" backslash \\ slash \/ \b\f\n\r\t unicode \u00e9 \u20AC pair \ud83d\ude00 raw é 😀"}"#,
            #"{"nested":{"deeper":[[],[{}],{"x":[1,[2,[3]]]}]},"n":-0,"big":123456789012345678}"#,
            #""a top-level string""#, "42", "true", "null", #"{"a":{"b":1},"b":{"a":1}}"#,
        ]
        for text in valid {
            let ours = try JSONParser.parse(Array(text.utf8))
            let theirs = try JSONSerialization.jsonObject(with: Data(text.utf8), options: .fragmentsAllowed) as? NSObject
            XCTAssertEqual(foundation(ours), theirs, text)
        }
        guard case .object(let o) = try JSONParser.parse(Array(#"{"b":true,"n":1}"#.utf8)), case .bool = o["b"], case .number = o["n"] else {
            return XCTFail("booleans and numbers stay apart")
        }
    }

    func testEverythingElseIsRefused() {
        let invalid: [[UInt8]] = [
            "", " ", "{", "}", "[1,]", "{\"a\":1,}", "{a:1}", "{'a':1}", "[01]", "[1.]", "[.5]", "[1e]", "[+1]", "[-]",
            "[1e999]", "tru", "nul", "[true false]", "{\"a\" 1}", "\"unterminated", "\"bad \\x escape\"", "\"\\u12\"",
            // A name twice in one object, however it is written.
            "{\"dup\":1,\"dup\":2}", "{\"a\":{\"b\":1,\"b\":1}}", "[{\"a\":1,\"\\u0061\":1}]",
            "\"lone \\ud800 high\"", "\"lone \\udc00 low\"", "\"raw \n newline\"", "\"tab\tinside\"", "[1] trailing", "// c\n1",
        ].map { Array($0.utf8) } + [
            [0x22, 0xC3, 0x28, 0x22],  // invalid UTF-8 in a string
            [0x22, 0xED, 0xA0, 0x80, 0x22],  // an encoded surrogate
            [0xEF, 0xBB, 0xBF] + Array("{}".utf8),  // a byte-order mark
            Array(String(repeating: "[", count: 513).utf8) + Array(String(repeating: "]", count: 513).utf8),
        ]
        for bytes in invalid {
            XCTAssertThrowsError(try JSONParser.parse(bytes), String(decoding: bytes, as: UTF8.self))
        }
        XCTAssertNoThrow(try JSONParser.parse(Array(String(repeating: "[", count: 500).utf8) + Array(String(repeating: "]", count: 500).utf8)))
    }
}
