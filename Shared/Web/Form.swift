import HTTP

/// A form a page posts (`application/x-www-form-urlencoded`, what a browser sends without a script), read strictly:
/// the content type must say so, the body is already within the route's limit (the server refused a larger one), the
/// fields are the ones named and each at most once, every `%` escape is whole, the text is UTF-8 without control
/// characters, and each value is at most its `max` bytes. Anything else is a 400 (415 for another type), naming the
/// field: a form is parsed no more loosely than a JSON body.
public struct Form: Sendable {
    public let values: [String: String]

    /// The form in `request`'s body, with only `fields` (name → the most bytes its value may have).
    public init(_ request: Request, fields: [String: Int]) throws {
        let media = request.header("content-type")?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased()
        guard media == "application/x-www-form-urlencoded" else {
            throw HTTPError.unsupportedMediaType("Send the form as application/x-www-form-urlencoded.")
        }
        var values: [String: String] = [:]
        for pair in request.body.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let equals = pair.firstIndex(of: UInt8(ascii: "="))
            guard let name = Self.decoded(pair[..<(equals ?? pair.endIndex)]) else { throw HTTPError.validation("The form is malformed.") }
            guard let max = fields[name] else { throw HTTPError.validation("Unknown field \"\(name.prefix(64))\".", field: String(name.prefix(64))) }
            guard values[name] == nil else { throw HTTPError.validation("\(name) is given twice.", field: name) }
            let raw = equals.map { pair[pair.index(after: $0)...] } ?? pair[pair.endIndex...]
            guard let value = Self.decoded(raw) else { throw HTTPError.validation("\(name) is malformed.", field: name) }
            guard value.utf8.count <= max else { throw HTTPError.validation("\(name) must be at most \(max) bytes.", field: name) }
            values[name] = value
        }
        self.values = values
    }

    public subscript(_ name: String) -> String? { values[name] }

    /// `+` as a space and `%XX` escapes decoded; nil for a broken escape, bytes that are not UTF-8, or a control
    /// character (a form field is one line of text; a password must not hide a NUL).
    static func decoded(_ bytes: ArraySlice<UInt8>) -> String? {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let byte = bytes[i]
            if byte == UInt8(ascii: "%") {
                guard i + 2 < bytes.endIndex, let high = hex(bytes[i + 1]), let low = hex(bytes[i + 2]) else { return nil }
                out.append(high << 4 | low)
                i += 3
                continue
            }
            out.append(byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
            i += 1
        }
        guard let text = String(validating: out, as: UTF8.self),
              !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else { return nil }
        return text
    }

    private static func hex(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
