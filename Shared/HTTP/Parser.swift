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
        var path: String
        var query: [String: String]
        /// 0 for HTTP/1.0, 1 for HTTP/1.1.
        var minorVersion: Int
        /// By lower-cased name; a repeated header keeps its first value.
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
        /// More bytes are needed; `scanned` is where the next look for the end of the head may start.
        case incomplete(scanned: Int)
        /// The head and how many bytes it took (blank line included).
        case complete(Head, consumed: Int)
        /// A head no server should serve; `method` and `path` as far as they were read, for the log.
        case refused(HTTPError, method: String, path: String)
    }

    private static let uriTooLong = HeadResult.refused(
        HTTPError(414, "uri_too_long", "The request line is longer than \(maxRequestLine) bytes."), method: "-", path: "-")
    private static let headTooLarge = HeadResult.refused(
        HTTPError(431, "header_too_large", "The request head is larger than \(maxHead) bytes."), method: "-", path: "-")

    private static let cr = UInt8(ascii: "\r"), lf = UInt8(ascii: "\n"), space = UInt8(ascii: " "), tab = UInt8(ascii: "\t")

    /// Parses the head at the start of `bytes` (leading blank lines are skipped); `from` is the `scanned` of the last
    /// incomplete answer, so that a head arriving a byte at a time is not scanned again from its start each time.
    static func head(_ bytes: UnsafeRawBufferPointer, from: Int = 0) -> HeadResult {
        var start = 0
        while start < bytes.count && (bytes[start] == cr || bytes[start] == lf) { start += 1 }
        // The end of the head: an empty line (CRLF CRLF, or bare LFs).
        var lineStart = max(start, from)
        var end = -1
        var i = lineStart
        while i < bytes.count {
            if bytes[i] == lf {
                let length = i - lineStart - (i > lineStart && bytes[i - 1] == cr ? 1 : 0)
                if length == 0 && lineStart > start { end = i + 1; break }
                lineStart = i + 1
            }
            i += 1
        }
        if end < 0 {
            let firstLineDone = bytes[start...].contains(lf)
            if !firstLineDone && bytes.count - start > maxRequestLine { return uriTooLong }
            if bytes.count - start > maxHead { return headTooLarge }
            return .incomplete(scanned: lineStart)
        }
        if end - start > maxHead { return headTooLarge }
        return parse(UnsafeRawBufferPointer(rebasing: bytes[start..<end]), consumed: end)
    }

    private static func parse(_ head: UnsafeRawBufferPointer, consumed: Int) -> HeadResult {
        var lines: [Slice<UnsafeRawBufferPointer>] = []
        var lineStart = 0
        for i in 0..<head.count where head[i] == lf {
            var lineEnd = i
            if lineEnd > lineStart && head[lineEnd - 1] == cr { lineEnd -= 1 }
            lines.append(head[lineStart..<lineEnd])
            lineStart = i + 1
        }
        lines.removeLast()  // the empty line
        let requestLine = lines[0]
        if requestLine.count > maxRequestLine { return uriTooLong }
        let parts = requestLine.split(separator: space, omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy(isToken) else {
            return badRequest("The request line is not 'METHOD target HTTP/1.1'.")
        }
        let method = String(decoding: parts[0], as: UTF8.self)
        let target = parts[1]
        guard !target.isEmpty, target.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            return badRequest("The request target is empty or holds characters it may not.")
        }
        let version = Array(parts[2])
        let minor: Int
        if version == Array("HTTP/1.1".utf8) {
            minor = 1
        } else if version == Array("HTTP/1.0".utf8) {
            minor = 0
        } else if version.count == 8, version.starts(with: Array("HTTP/".utf8)), isDigit(version[5]), version[6] == UInt8(ascii: "."),
                  isDigit(version[7]) {
            return .refused(HTTPError(505, "http_version_not_supported", "Only HTTP/1.1 and HTTP/1.0 are served."),
                            method: method, path: "-")
        } else {
            return badRequest("The request line is not 'METHOD target HTTP/1.1'.")
        }
        let (path, query): (String, [String: String])
        if target.first == UInt8(ascii: "/") {
            let question = target.firstIndex(of: UInt8(ascii: "?"))
            path = String(decoding: percentDecoded(target[..<(question ?? target.endIndex)], plusIsSpace: false), as: UTF8.self)
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
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex,
                  line[line.startIndex..<colon].allSatisfy(isToken) else {
                return badRequest("A header line is not 'Name: value'.", method: method, path: path)
            }
            var valueStart = line.index(after: colon), valueEnd = line.endIndex
            while valueStart < valueEnd && (line[valueStart] == space || line[valueStart] == tab) { valueStart += 1 }
            while valueEnd > valueStart && (line[valueEnd - 1] == space || line[valueEnd - 1] == tab) { valueEnd -= 1 }
            let value = line[valueStart..<valueEnd]
            guard !value.contains(where: { ($0 < 0x20 && $0 != tab) || $0 == 0x7F }) else {
                return badRequest("A header value holds a control character.", method: method, path: path)
            }
            let name = String(decoding: line[line.startIndex..<colon].map(lowercased), as: UTF8.self)
            let text = String(decoding: value, as: UTF8.self)
            if name == "content-length" {
                guard !value.isEmpty, value.count <= 15, value.allSatisfy(isDigit), let length = Int(text),
                      contentLength == nil || contentLength == length else {
                    return badRequest("Content-Length is not one number.", method: method, path: path)
                }
                contentLength = length
            }
            if headers[name] == nil { headers[name] = text }
        }
        var body = Body.none
        if let coding = headers["transfer-encoding"] {
            guard coding.lowercased() == "chunked" else {
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

    /// Where a chunked body's reading stands between reads.
    struct Chunked {
        enum State { case size, data(Int), dataEnd, trailer }
        var state = State.size

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

        /// Reads what it can of `bytes`, appending chunk data to `body`, up to `limit` bytes of body.
        mutating func read(_ bytes: UnsafeRawBufferPointer, into body: inout [UInt8], limit: Int) -> Step {
            var i = 0
            while true {
                switch state {
                case .size, .trailer:
                    guard let newline = bytes[i...].firstIndex(of: lf) else {
                        if bytes.count - i > 1024 { return .refused(HTTPError(400, "bad_request", "A chunk line is too long.")) }
                        return .more(consumed: i)
                    }
                    var line = bytes[i..<newline]
                    if line.last == cr { line = line.dropLast() }
                    i = newline + 1
                    if case .trailer = state {
                        if line.isEmpty { return .done(consumed: i) }
                        continue
                    }
                    let digits = line.prefix { $0 != UInt8(ascii: ";") && $0 != space && $0 != tab }
                    guard !digits.isEmpty, digits.count <= 15, digits.allSatisfy({ hexValue($0) != nil }) else {
                        return .refused(HTTPError(400, "bad_request", "A chunk size is not a hexadecimal number."))
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
                    if i < bytes.count && bytes[i] == cr { i += 1 }
                    guard i < bytes.count else { return .more(consumed: i) }
                    guard bytes[i] == lf else { return .refused(HTTPError(400, "bad_request", "A chunk does not end with CRLF.")) }
                    i += 1
                    state = .size
                }
            }
        }
    }

    // MARK: Bytes

    private static func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }

    private static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case 0x30...0x39: return b - 0x30
        case 0x41...0x46: return b - 0x41 + 10
        case 0x61...0x66: return b - 0x61 + 10
        default: return nil
        }
    }

    private static func lowercased(_ b: UInt8) -> UInt8 { b >= 0x41 && b <= 0x5A ? b | 0x20 : b }

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
