import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A response read by `HTTPClient`.
public struct ClientResponse: Sendable {
    /// The status code.
    public let status: Int
    /// Headers by lower-cased name.
    public let headers: [String: String]
    /// The body.
    public let body: [UInt8]

    /// The body as UTF-8 text.
    public var text: String { String(decoding: body, as: UTF8.self) }
}

/// Client-side failures.
public enum HTTPClientError: Error, CustomStringConvertible {
    case cannotConnect(String)
    case malformedResponse
    case closed
    public var description: String {
        switch self {
        case .cannotConnect(let target): return "cannot connect to \(target)"
        case .malformedResponse: return "malformed HTTP response"
        case .closed: return "connection closed"
        }
    }
}

/// A small blocking HTTP/1.1 client over one keep-alive connection (plain HTTP): for fetching keys,
/// for tests and for the load tester. Not thread-safe: one client per thread.
public final class HTTPClient {
    private let host: String
    private let port: Int
    private let timeout: TimeInterval
    private var socket: Int32 = -1
    private var buffer: [UInt8] = []

    /// A client for `host:port`; connects on first use.
    public init(host: String = "127.0.0.1", port: Int, timeout: TimeInterval = 30) {
        self.host = host; self.port = port; self.timeout = timeout
    }

    /// A client for a base URL such as `http://auth:8081` (path ignored).
    public convenience init?(url: String, timeout: TimeInterval = 30) {
        guard let components = URLComponents(string: url), components.scheme == "http", let host = components.host
        else { return nil }
        self.init(host: host, port: components.port ?? 80, timeout: timeout)
    }

    deinit { disconnect() }

    /// Closes the connection; the next request opens a new one.
    public func disconnect() {
        if socket >= 0 { close(socket); socket = -1 }
        buffer = []
    }

    /// Sends one request and reads the whole response. Retries once on a stale keep-alive connection.
    public func request(_ method: String, _ path: String, headers: [String: String] = [:],
                        body: [UInt8] = []) throws -> ClientResponse {
        let reused = socket >= 0
        do {
            return try attempt(method, path, headers: headers, body: body)
        } catch HTTPClientError.closed where reused {
            disconnect()
            return try attempt(method, path, headers: headers, body: body)
        }
    }

    private func attempt(_ method: String, _ path: String, headers: [String: String], body: [UInt8]) throws -> ClientResponse {
        if socket < 0 { try connect() }
        var head = "\(method) \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\n"
        var hasLength = false
        for (name, value) in headers {
            if name.lowercased() == "content-length" { hasLength = true }
            head += "\(name): \(value)\r\n"
        }
        if !hasLength && (!body.isEmpty || ["POST", "PUT", "PATCH"].contains(method)) {
            head += "Content-Length: \(body.count)\r\n"
        }
        head += "\r\n"
        let sent = write(Array(head.utf8) + body)
        // The server may answer early (413) and close while the body is still being sent: read what it said.
        do {
            return try readResponse(method: method)
        } catch {
            disconnect()
            if !sent { throw HTTPClientError.closed }
            throw error
        }
    }

    private func connect() throws {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &list) == 0, let first = list else {
            throw HTTPClientError.cannotConnect("\(host):\(port)")
        }
        defer { freeaddrinfo(list) }
        var node: UnsafeMutablePointer<addrinfo>? = first
        while let info = node {
            let fd = Glibc.socket(info.pointee.ai_family, info.pointee.ai_socktype, info.pointee.ai_protocol)
            if fd >= 0 {
                var tv = timeval(tv_sec: Int(timeout), tv_usec: 0)
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
                setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
                var one: Int32 = 1
                setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                if Glibc.connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 {
                    socket = fd
                    buffer = []
                    return
                }
                close(fd)
            }
            node = info.pointee.ai_next
        }
        throw HTTPClientError.cannotConnect("\(host):\(port)")
    }

    private func write(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { send(socket, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return false }
            offset += n
        }
        return true
    }

    private func fill() throws {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { recv(socket, $0.baseAddress, 65536, 0) }
        if n <= 0 { throw HTTPClientError.closed }
        buffer.append(contentsOf: chunk[0..<n])
    }

    private func readLine() throws -> String {
        while true {
            if let i = buffer.firstIndex(of: 10) {
                var line = Array(buffer[0..<i])
                buffer.removeFirst(i + 1)
                if line.last == 13 { line.removeLast() }
                return String(decoding: line, as: UTF8.self)
            }
            try fill()
        }
    }

    private func readBytes(_ count: Int) throws -> [UInt8] {
        while buffer.count < count { try fill() }
        let out = Array(buffer[0..<count])
        buffer.removeFirst(count)
        return out
    }

    private func readResponse(method: String) throws -> ClientResponse {
        let statusLine = try readLine()
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/"), let status = Int(parts[1]) else {
            throw HTTPClientError.malformedResponse
        }
        var headers: [String: String] = [:]
        while true {
            let line = try readLine()
            if line.isEmpty { break }
            guard let colon = line.firstIndex(of: ":") else { throw HTTPClientError.malformedResponse }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers[name] = headers[name].map { $0 + ", " + value } ?? value
        }
        var body: [UInt8] = []
        if method == "HEAD" || status == 204 || status == 304 {
        } else if let length = headers["content-length"].flatMap({ Int($0) }) {
            body = try readBytes(length)
        } else if headers["transfer-encoding"]?.lowercased().contains("chunked") == true {
            while true {
                let sizeLine = try readLine()
                guard let size = Int(sizeLine.split(separator: ";").first ?? "", radix: 16) else {
                    throw HTTPClientError.malformedResponse
                }
                if size == 0 { while try !readLine().isEmpty {}; break }
                body += try readBytes(size)
                _ = try readLine()
            }
        } else {
            while true {
                do { try fill() } catch { break }
            }
            body = buffer
            buffer = []
            disconnect()
        }
        if headers["connection"]?.lowercased() == "close" { disconnect() }
        return ClientResponse(status: status, headers: headers, body: body)
    }
}
