import Glibc

/// HTTP/1.1 request heads and chunked bodies, read from bytes (RFC 9112). What it refuses it refuses with the error
/// contract's `HTTPError`, so the server answers a malformed head like any other refusal: JSON, logged and counted.
enum Parser {
    /// The longest request line (method, target, version): longer is 414.
    static let maxRequestLine = 8 << 10
    /// The longest head in all: longer is 431.
    static let maxHead = 32 << 10

    /// A parsed request head.
    struct Head {
        var method: String
        /// The path as sent, still percent-encoded: the router splits it into segments before it decodes any, so
        /// `%2F` stays inside its segment and `/%6detrics` is not `/metrics`.
        var path: String
        var query: [String: String]
        /// 0 for HTTP/1.0, 1 for HTTP/1.1.
        var minorVersion: Int
        /// By lower-cased name; repeated lines are combined in order with ", " (RFC 9110, 5.3).
        var headers: [String: String]
        var body: Body
        var keepAlive: Bool
        var expectsContinue: Bool
    }

    enum Body: Equatable {
        case none
        case length(Int)
        case chunked
    }

    enum HeadResult {
        /// More bytes are needed.
        case incomplete
        /// The head and how many bytes it took (blank line included).
        case complete(Head, consumed: Int)
        /// A head no server should serve; `method` and `path` as far as they were read, for the log.
        case refused(HTTPError, method: String, path: String)
    }

    /// Where the reading of a head arriving in pieces stands, so that each read looks only at the new bytes.
    struct Scan {
        /// Where the request line starts (after the blank lines a client may send first), once known.
        var start = -1
        /// Where the line being read starts.
        var lineStart = 0
        /// How far the bytes have been looked at.
        var next = 0
    }

    private static let uriTooLong = HeadResult.refused(
        HTTPError(414, "uri_too_long", "The request line is longer than \(maxRequestLine) bytes."), method: "-", path: "-")
    private static let headTooLarge = HeadResult.refused(
        HTTPError(431, "header_too_large", "The request head is larger than \(maxHead) bytes."), method: "-", path: "-")

    private static let cr = UInt8(ascii: "\r"), lf = UInt8(ascii: "\n"), space = UInt8(ascii: " "), tab = UInt8(ascii: "\t")

    /// Parses the head at the start of `bytes`, resuming where `scan` stopped on the last call with the same bytes
    /// and more. Blank lines before the request line are skipped, but count against the head's limit like any byte.
    static func head(_ bytes: UnsafeRawBufferPointer, scan: inout Scan) -> HeadResult {
        var i = scan.next
        if scan.start < 0 {
            while i < bytes.count && (bytes[i] == cr || bytes[i] == lf) { i += 1 }
            scan.next = i
            guard i < bytes.count else { return bytes.count > maxHead ? headTooLarge : .incomplete }
            scan.start = i
            scan.lineStart = i
        }
        let start = scan.start
        var end = -1
        while let at = lineFeed(in: bytes, from: i) {
            i = at
            let length = i - scan.lineStart - (i > scan.lineStart && bytes[i - 1] == cr ? 1 : 0)
            if scan.lineStart == start && length > maxRequestLine { return uriTooLong }
            if length == 0 { end = i + 1; break }
            scan.lineStart = i + 1
            i += 1
        }
        guard end >= 0 else {
            scan.next = bytes.count  // every byte so far looked at: the next call looks only at what arrives
            if scan.lineStart == start && bytes.count - start > maxRequestLine { return uriTooLong }
            return bytes.count > maxHead ? headTooLarge : .incomplete
        }
        if end > maxHead { return headTooLarge }
        return parse(UnsafeRawBufferPointer(rebasing: bytes[start..<end]), consumed: end)
    }

    private static func parse(_ head: UnsafeRawBufferPointer, consumed: Int) -> HeadResult {
        var lines: [Slice<UnsafeRawBufferPointer>] = []
        lines.reserveCapacity(16)
        var lineStart = 0
        while let i = lineFeed(in: head, from: lineStart) {
            var lineEnd = i
            if lineEnd > lineStart && head[lineEnd - 1] == cr { lineEnd -= 1 }
            lines.append(head[lineStart..<lineEnd])
            lineStart = i + 1
        }
        lines.removeLast()  // the empty line
        let requestLine = lines[0]
        if requestLine.count > maxRequestLine { return uriTooLong }
        // Exactly two spaces: method, target, version.
        guard let firstSpace = requestLine.firstIndex(of: space), let lastSpace = requestLine.lastIndex(of: space),
              firstSpace < lastSpace, !requestLine[(firstSpace + 1)..<lastSpace].contains(space) else {
            return badRequest("The request line is not 'METHOD target HTTP/1.1'.")
        }
        let methodBytes = requestLine[..<firstSpace], target = requestLine[(firstSpace + 1)..<lastSpace]
        let version = requestLine[(lastSpace + 1)...]
        guard !methodBytes.isEmpty, methodBytes.allSatisfy(isToken) else {
            return badRequest("The request line is not 'METHOD target HTTP/1.1'.")
        }
        let method = String(decoding: methodBytes, as: UTF8.self)
        guard !target.isEmpty, target.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            return badRequest("The request target is empty or holds characters it may not.")
        }
        let minor: Int
        if bytes(version, are: "HTTP/1.1") {
            minor = 1
        } else if bytes(version, are: "HTTP/1.0") {
            minor = 0
        } else if version.count == 8, bytes(version.prefix(5), are: "HTTP/"), isDigit(version[version.startIndex + 5]),
                  version[version.startIndex + 6] == UInt8(ascii: "."), isDigit(version[version.startIndex + 7]) {
            return .refused(HTTPError(505, "http_version_not_supported", "Only HTTP/1.1 and HTTP/1.0 are served."),
                            method: method, path: "-")
        } else {
            return badRequest("The request line is not 'METHOD target HTTP/1.1'.")
        }
        let (path, query): (String, [String: String])
        if target.first == UInt8(ascii: "/") {
            let question = target.firstIndex(of: UInt8(ascii: "?"))
            path = String(decoding: target[..<(question ?? target.endIndex)], as: UTF8.self)
            query = question.map { parseQuery(target[target.index(after: $0)...]) } ?? [:]
        } else if method == "OPTIONS" && target.count == 1 && target.first == UInt8(ascii: "*") {
            (path, query) = ("*", [:])
        } else {
            return badRequest("The request target must be a path beginning with '/'.", method: method)
        }

        var headers: [String: String] = [:]
        headers.reserveCapacity(lines.count)
        var contentLength: Int?
        for line in lines.dropFirst() {
            let rawName: Slice<UnsafeRawBufferPointer>, value: Slice<UnsafeRawBufferPointer>
            switch field(line) {
            case .field(let n, let v): (rawName, value) = (n, v)
            case .malformed: return badRequest("A header line is not 'Name: value'.", method: method, path: path)
            case .controlCharacter: return badRequest("A header value holds a control character.", method: method, path: path)
            }
            let name = rawName.contains(where: isUpper) ? String(decoding: rawName.map(lowercased), as: UTF8.self)
                                                        : String(decoding: rawName, as: UTF8.self)
            let text = String(decoding: value, as: UTF8.self)
            if name == "content-length" {
                guard !value.isEmpty, value.count <= 15, value.allSatisfy(isDigit), let length = Int(text),
                      contentLength == nil || contentLength == length else {
                    return badRequest("Content-Length is not one number.", method: method, path: path)
                }
                contentLength = length
                headers[name] = text
            } else if let earlier = headers[name] {
                // RFC 9110, 5.3: repeated lines are one list, in order. A second Host is never valid (RFC 9112, 3.2).
                if name == "host" { return badRequest("A request has one Host header.", method: method, path: path) }
                headers[name] = earlier + (name == "cookie" ? "; " : ", ") + text
            } else {
                if name == "host" && !isValidHost(value) {
                    return badRequest("The Host header is not a host name or address with an optional port.", method: method, path: path)
                }
                headers[name] = text
            }
        }
        var body = Body.none
        if let coding = headers["transfer-encoding"] {
            // RFC 9112, 6.3: a request whose last coding is not chunked, once, cannot be framed: 400. A coding this
            // server does not decode (gzip before chunked) is 501.
            let codings = coding.split(separator: ",", omittingEmptySubsequences: false).map {
                String($0.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed()).lowercased()
            }
            guard codings.last == "chunked", codings.filter({ $0 == "chunked" }).count == 1 else {
                return badRequest("Transfer-Encoding must end with 'chunked', once.", method: method, path: path)
            }
            guard codings.count == 1 else {
                return .refused(HTTPError(501, "not_implemented", "The only transfer coding accepted is 'chunked'."),
                                method: method, path: path)
            }
            guard contentLength == nil, minor == 1 else {
                return badRequest("A chunked body must be HTTP/1.1 and have no Content-Length.", method: method, path: path)
            }
            body = .chunked
        } else if let contentLength, contentLength > 0 {
            body = .length(contentLength)
        }
        let connection = headers["connection"]?.lowercased() ?? ""
        let keepAlive = minor == 1 ? !hasToken(connection, "close") : hasToken(connection, "keep-alive")
        let expectsContinue = minor == 1 && body != .none && headers["expect"]?.lowercased() == "100-continue"
        return .complete(Head(method: method, path: path, query: query, minorVersion: minor, headers: headers, body: body,
                              keepAlive: keepAlive, expectsContinue: expectsContinue), consumed: consumed)
    }

    enum FieldLine {
        case field(name: Slice<UnsafeRawBufferPointer>, value: Slice<UnsafeRawBufferPointer>)
        case malformed
        case controlCharacter
    }

    /// A field line, of a head or a chunked body's trailer (RFC 9112, 5): a token, a colon, and a value, without the
    /// space or tab around it, holding no control character.
    static func field(_ line: Slice<UnsafeRawBufferPointer>) -> FieldLine {
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex,
              line[line.startIndex..<colon].allSatisfy(isToken) else { return .malformed }
        var valueStart = line.index(after: colon), valueEnd = line.endIndex
        while valueStart < valueEnd && (line[valueStart] == space || line[valueStart] == tab) { valueStart += 1 }
        while valueEnd > valueStart && (line[valueEnd - 1] == space || line[valueEnd - 1] == tab) { valueEnd -= 1 }
        let value = line[valueStart..<valueEnd]
        guard !UnsafeRawBufferPointer(rebasing: value).contains(where: { ($0 < 0x20 && $0 != tab) || $0 == 0x7F }) else {
            return .controlCharacter
        }
        return .field(name: line[line.startIndex..<colon], value: value)
    }

    /// A 400 for a malformed head; `method` and `path` as far as they were read, for the log.
    private static func badRequest(_ message: String, method: String = "-", path: String = "-") -> HeadResult {
        .refused(HTTPError(400, "bad_request", message), method: method, path: path)
    }

    /// Query parameters: `+` is a space, percent escapes are decoded, a repeated name keeps its first value.
    static func parseQuery<C: Collection<UInt8>>(_ query: C) -> [String: String] {
        var result: [String: String] = [:]
        for pair in query.split(separator: UInt8(ascii: "&")) {
            let equals = pair.firstIndex(of: UInt8(ascii: "="))
            let key = String(decoding: percentDecoded(pair[..<(equals ?? pair.endIndex)], plusIsSpace: true), as: UTF8.self)
            let value = equals.map { String(decoding: percentDecoded(pair[pair.index(after: $0)...], plusIsSpace: true), as: UTF8.self) } ?? ""
            if !key.isEmpty && result[key] == nil { result[key] = value }
        }
        return result
    }

    /// Decodes `%XX` escapes, except `%00`, which stays as it is: a NUL must not cut a path short anywhere after it.
    static func percentDecoded<C: Collection<UInt8>>(_ bytes: C, plusIsSpace: Bool) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let byte = bytes[i]
            if byte == UInt8(ascii: "%"), let h = bytes.index(i, offsetBy: 1, limitedBy: bytes.endIndex), h < bytes.endIndex,
               let l = bytes.index(h, offsetBy: 1, limitedBy: bytes.endIndex), l < bytes.endIndex,
               let high = hexValue(bytes[h]), let low = hexValue(bytes[l]), high | low != 0 {
                out.append(high << 4 | low)
                i = bytes.index(after: l)
                continue
            }
            out.append(plusIsSpace && byte == UInt8(ascii: "+") ? space : byte)
            i = bytes.index(after: i)
        }
        return out
    }

    // MARK: Chunked bodies

    /// Where a chunked body's reading stands between reads. Strict, as RFC 9112, 7.1 says, since a proxy in front
    /// may frame a lenient reading differently: lines end with CRLF, a chunk size is hexadecimal and its extensions
    /// are `;name[=value]`, each chunk ends with CRLF, and trailer lines are fields, `maxTrailer` bytes in all.
    struct Chunked {
        enum State { case size, data(Int), dataEnd, trailer }
        var state = State.size
        /// Bytes of trailer lines read so far.
        var trailerBytes = 0
        static let maxLine = 1024
        static let maxTrailer = 8 << 10

        enum Step {
            /// Needs more bytes; everything before `consumed` was used.
            case more(consumed: Int)
            /// The body is complete after `consumed` bytes.
            case done(consumed: Int)
            /// A malformed body.
            case refused(HTTPError)
            /// The body would grow past the limit.
            case tooLarge
        }

        private static func malformed(_ message: String) -> Step { .refused(HTTPError(400, "bad_request", message)) }

        /// Reads what it can of `bytes`, appending chunk data to `body`, up to `limit` bytes of body.
        mutating func read(_ bytes: UnsafeRawBufferPointer, into body: inout [UInt8], limit: Int) -> Step {
            var i = 0
            while true {
                switch state {
                case .size, .trailer:
                    guard let newline = bytes[i...].firstIndex(of: lf) else {
                        if bytes.count - i > Self.maxLine { return Self.malformed("A chunk line is too long.") }
                        if case .trailer = state, trailerBytes + bytes.count - i > Self.maxTrailer {
                            return Self.malformed("The trailer is larger than \(Self.maxTrailer) bytes.")
                        }
                        return .more(consumed: i)
                    }
                    guard newline > i, bytes[newline - 1] == cr else { return Self.malformed("A chunk line does not end with CRLF.") }
                    let line = bytes[i..<(newline - 1)]
                    i = newline + 1
                    if case .trailer = state {
                        if line.isEmpty { return .done(consumed: i) }
                        trailerBytes += line.count + 2
                        guard trailerBytes <= Self.maxTrailer else { return Self.malformed("The trailer is larger than \(Self.maxTrailer) bytes.") }
                        guard case .field = field(line) else { return Self.malformed("A trailer line is not 'Name: value'.") }
                        continue
                    }
                    let digits = line.prefix { hexValue($0) != nil }
                    guard !digits.isEmpty, digits.count <= 15 else {
                        return Self.malformed("A chunk size is not a hexadecimal number.")
                    }
                    guard Self.isExtensionList(line[digits.endIndex...]) else {
                        return Self.malformed("A chunk extension is not ';name' or ';name=value'.")
                    }
                    let size = digits.reduce(0) { $0 << 4 | Int(hexValue($1)!) }
                    if size == 0 { state = .trailer; continue }
                    if body.count + size > limit { return .tooLarge }
                    state = .data(size)
                case .data(let left):
                    let n = min(left, bytes.count - i)
                    if n == 0 { return .more(consumed: i) }
                    body.append(contentsOf: bytes[i..<(i + n)])
                    i += n
                    state = n == left ? .dataEnd : .data(left - n)
                case .dataEnd:
                    guard bytes.count - i >= 2 else {
                        if i < bytes.count && bytes[i] != cr { return Self.malformed("A chunk does not end with CRLF.") }
                        return .more(consumed: i)
                    }
                    guard bytes[i] == cr, bytes[i + 1] == lf else { return Self.malformed("A chunk does not end with CRLF.") }
                    i += 2
                    state = .size
                }
            }
        }

        /// `*( BWS ";" BWS token [ BWS "=" BWS ( token / quoted-string ) ] )`.
        static func isExtensionList(_ text: Slice<UnsafeRawBufferPointer>) -> Bool {
            var i = text.startIndex
            func skipSpace() { while i < text.endIndex && (text[i] == space || text[i] == tab) { i += 1 } }
            func token() -> Bool {
                let from = i
                while i < text.endIndex && isToken(text[i]) { i += 1 }
                return i > from
            }
            while true {
                skipSpace()
                if i == text.endIndex { return true }
                guard text[i] == UInt8(ascii: ";") else { return false }
                i += 1
                skipSpace()
                guard token() else { return false }
                skipSpace()
                guard i < text.endIndex, text[i] == UInt8(ascii: "=") else { continue }
                i += 1
                skipSpace()
                if i < text.endIndex && text[i] == UInt8(ascii: "\"") {
                    i += 1
                    var closed = false
                    while i < text.endIndex {
                        let b = text[i]
                        if b == UInt8(ascii: "\"") { closed = true; i += 1; break }
                        if b == UInt8(ascii: "\\") { i += 1; guard i < text.endIndex, text[i] >= 0x20 || text[i] == tab, text[i] != 0x7F else { return false } }
                        else if (b < 0x20 && b != tab) || b == 0x7F { return false }
                        i += 1
                    }
                    guard closed else { return false }
                } else if !token() {
                    return false
                }
            }
        }
    }

    // MARK: Bytes

    private static func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }

    /// `Host = uri-host [ ":" port ]` (RFC 9110, 7.2; RFC 3986): a bracketed IPv6 literal, or a registered name or
    /// IPv4 address of unreserved characters, escapes and sub-delims. Empty is allowed (RFC 9112, 3.2).
    static func isValidHost(_ host: Slice<UnsafeRawBufferPointer>) -> Bool {
        var rest = host[...]
        if rest.first == UInt8(ascii: "[") {
            guard let close = rest.firstIndex(of: UInt8(ascii: "]")), close > rest.startIndex + 1 else { return false }
            guard rest[(rest.startIndex + 1)..<close].allSatisfy({ hexValue($0) != nil || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") })
            else { return false }
            rest = rest[(close + 1)...]
            guard rest.isEmpty || rest.first == UInt8(ascii: ":") else { return false }
            return rest.dropFirst().allSatisfy(isDigit)
        }
        if let colon = rest.lastIndex(of: UInt8(ascii: ":")) {
            guard rest[(colon + 1)...].allSatisfy(isDigit) else { return false }
            rest = rest[..<colon]
        }
        var i = rest.startIndex
        while i < rest.endIndex {
            let b = rest[i]
            if b == UInt8(ascii: "%") {
                guard i + 2 < rest.endIndex, hexValue(rest[i + 1]) != nil, hexValue(rest[i + 2]) != nil else { return false }
                i += 3
                continue
            }
            switch b {
            case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"),
                 UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"),
                 UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="):
                i += 1
            default:
                return false
            }
        }
        return true
    }

    private static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case 0x30...0x39: return b - 0x30
        case 0x41...0x46: return b - 0x41 + 10
        case 0x61...0x66: return b - 0x61 + 10
        default: return nil
        }
    }

    /// Where the next LF at or after `from` is (`memchr`: every byte of a head, a token's hundreds included, is looked
    /// at twice for line ends).
    private static func lineFeed(in bytes: UnsafeRawBufferPointer, from: Int) -> Int? {
        guard from < bytes.count, let base = bytes.baseAddress, let found = memchr(base + from, Int32(lf), bytes.count - from) else {
            return nil
        }
        return base.distance(to: UnsafeRawPointer(found))
    }

    /// Whether `slice` holds exactly the bytes of `text`.
    private static func bytes(_ slice: Slice<UnsafeRawBufferPointer>, are text: StaticString) -> Bool {
        slice.count == text.utf8CodeUnitCount && UnsafeRawBufferPointer(rebasing: slice).elementsEqual(
            UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// An ASCII upper-case letter.
    static func isUpper(_ b: UInt8) -> Bool { b >= 0x41 && b <= 0x5A }
    private static func lowercased(_ b: UInt8) -> UInt8 { isUpper(b) ? b | 0x20 : b }

    /// A `tchar` of RFC 9110: what names of methods and headers are made of.
    private static func isToken(_ b: UInt8) -> Bool {
        switch b {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        case 0x21, 0x23...0x27, 0x2A, 0x2B, 0x2D, 0x2E, 0x5E...0x60, 0x7C, 0x7E: return true  // !#$%&'*+-.^_`|~
        default: return false
        }
    }

    private static func hasToken(_ list: String, _ token: String) -> Bool {
        list.split(separator: ",").contains { $0.filter { $0 != " " && $0 != "\t" } == token }
    }
}
