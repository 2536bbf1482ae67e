import Foundation
import XCTest

/// Statements are `SQL`, whose interpolation numbers the parameters and whose records name their columns: a `$1`
/// written by hand or a `SELECT *` in a string literal is a statement that went around it.
final class SQLSourceTests: XCTestCase {
    /// What is read: the services' and the kit's sources. Shared/Postgres builds the statements (its `$n` are the
    /// numbering itself); migrations are scripts run without parameters.
    static let roots = ["Shared", "Services"]
    static let skipped = ["Shared/Postgres/"]

    func testNoStringLiteralHoldsAPlaceholderWrittenByHandOrSelectsEveryColumn() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        var found: [String] = []
        for top in Self.roots {
            let enumerator = FileManager.default.enumerator(at: root.appendingPathComponent(top), includingPropertiesForKeys: nil)
            while let url = enumerator?.nextObject() as? URL {
                let path = String(url.path.dropFirst(root.path.count + 1))
                guard path.hasSuffix(".swift"), !url.lastPathComponent.hasPrefix("Migrations"),
                      !Self.skipped.contains(where: path.hasPrefix) else { continue }
                found += Self.problems(in: try String(contentsOf: url, encoding: .utf8)).map { "\(path):\($0.line): \($0.what)" }
            }
        }
        XCTAssertEqual(found, [], "write statements as SQL: \\(value) binds a parameter, a record's columns name what it reads")
    }

    func testTheScanReadsOnlyStringLiteralsAndNotTheirInterpolations() {
        let source = #"""
            let a = xs.map { $0 + 1 }  // "$1" in a comment
            let b = "WHERE id = $1"
            let c = """
                SELECT * FROM t
                WHERE \(ys.map { $0 }) RETURNING *
                """
            let d = #"a "quoted" $2"#
            let e = "price \(f("$3"))"
            let g: SQL = "WHERE id = \(id) AND n = '$'"
            """#
        XCTAssertEqual(Self.problems(in: source).map { "\($0.line) \($0.what)" }, [
            "2 $1", "4 SELECT *", "5 RETURNING *", "7 $2", "8 $3",
        ])
    }

    /// The hand-written placeholders (`$` and a digit) and `SELECT *` / `RETURNING *` in the string literals of a Swift
    /// source, with their lines; comments and the code inside an interpolation are not literals.
    static func problems(in source: String) -> [(line: Int, what: String)] {
        let s = Array(source.unicodeScalars)
        var problems: [(line: Int, what: String)] = []
        var line = 1, i = 0
        /// An open literal: its delimiter's `#` count and whether it is multi-line.
        struct Literal { var hashes: Int; var multiline: Bool }
        /// What encloses the point read: literals, and for each interpolation its open parentheses.
        enum Frame { case literal(Literal), interpolation(depth: Int) }
        var stack: [Frame] = []
        /// The text of each open literal read so far, with each character's line.
        var texts: [[(Unicode.Scalar, Int)]] = []

        func at(_ k: Int) -> Unicode.Scalar? { k < s.count ? s[k] : nil }
        func starts(_ text: String, _ k: Int) -> Bool {
            for (n, c) in text.unicodeScalars.enumerated() where at(k + n) != c { return false }
            return true
        }
        func close(_ literal: [(Unicode.Scalar, Int)]) {
            let text = literal.map(\.0)
            func word(_ k: Int) -> Bool { k >= 0 && k < text.count && (text[k].properties.isAlphabetic || ("0"..."9").contains(text[k]) || text[k] == "_") }
            for k in text.indices {
                if text[k] == "$", k + 1 < text.count, ("0"..."9").contains(text[k + 1]) {
                    problems.append((literal[k].1, "$" + String(text[k + 1])))
                }
                for keyword in ["SELECT", "RETURNING"] where !word(k - 1) {
                    let letters = Array(keyword.unicodeScalars)
                    guard k + letters.count < text.count,
                          letters.indices.allSatisfy({ String(text[k + $0]).uppercased() == String(letters[$0]) }) else { continue }
                    var next = k + letters.count
                    guard !word(next) else { continue }
                    while next < text.count, text[next] == " " || text[next] == "\n" || text[next] == "\t" { next += 1 }
                    if next < text.count, text[next] == "*" { problems.append((literal[k].1, keyword + " *")) }
                }
            }
        }

        while i < s.count {
            let c = s[i]
            if case .literal(let literal)? = stack.last {
                let hashes = String(repeating: "#", count: literal.hashes)
                if c == "\\" && starts(hashes, i + 1) {
                    let after = i + 1 + literal.hashes
                    if at(after) == "(" {
                        stack.append(.interpolation(depth: 1)); i = after + 1; continue
                    }
                    if at(after) == "\n" { line += 1 }
                    // An escape stands for another character: it is kept as a blank, never as a `$` or a `*`.
                    texts[texts.count - 1].append((" ", line)); i = after + 1; continue
                }
                let end = (literal.multiline ? "\"\"\"" : "\"") + hashes
                if starts(end, i) {
                    stack.removeLast(); close(texts.removeLast()); i += end.unicodeScalars.count; continue
                }
                if c == "\n" { line += 1 }
                texts[texts.count - 1].append((c, line)); i += 1
                continue
            }
            // Code: at the top level or inside an interpolation.
            if c == "\n" { line += 1; i += 1; continue }
            if starts("//", i) {
                while i < s.count && s[i] != "\n" { i += 1 }
                continue
            }
            if starts("/*", i) {
                var depth = 0
                repeat {
                    if starts("/*", i) { depth += 1; i += 2 } else if starts("*/", i) { depth -= 1; i += 2 } else {
                        if s[i] == "\n" { line += 1 }
                        i += 1
                    }
                } while depth > 0 && i < s.count
                continue
            }
            var hashes = 0
            while at(i + hashes) == "#" { hashes += 1 }
            if at(i + hashes) == "\"" {
                let multiline = starts("\"\"\"", i + hashes)
                stack.append(.literal(Literal(hashes: hashes, multiline: multiline)))
                texts.append([])
                i += hashes + (multiline ? 3 : 1)
                continue
            }
            if case .interpolation(let depth)? = stack.last {
                if c == "(" { stack[stack.count - 1] = .interpolation(depth: depth + 1) }
                if c == ")" {
                    if depth == 1 { stack.removeLast() } else { stack[stack.count - 1] = .interpolation(depth: depth - 1) }
                }
            }
            i += max(hashes, 1)
        }
        return problems
    }
}
