import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A minimal blocking Redis client (RESP2) on one connection: enough to load points and run GEOSEARCH.
final class Redis {
    enum Reply { case text(String), integer(Int), bulk([UInt8]?), array([Reply]?), error(String) }
    struct Failure: Error, CustomStringConvertible { let description: String }

    private let fd: Int32
    private var buffer: [UInt8] = []
    private var position = 0

    init(host: String, port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, host, &address.sin_addr)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { close(fd); throw Failure(description: "cannot connect to Redis at \(host):\(port)") }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    deinit { close(fd) }

    /// Sends commands back to back, then reads one reply per command.
    func pipeline(_ commands: [[String]]) throws -> [Reply] {
        var out: [UInt8] = []
        for command in commands {
            out += Array("*\(command.count)\r\n".utf8)
            for arg in command { let bytes = Array(arg.utf8); out += Array("$\(bytes.count)\r\n".utf8) + bytes + [13, 10] }
        }
        var sent = 0
        while sent < out.count {
            let n = out[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { throw Failure(description: "Redis connection lost") }
            sent += n
        }
        return try commands.map { _ in try read() }
    }

    func call(_ command: [String]) throws -> Reply { try pipeline([command])[0] }

    private func byte() throws -> UInt8 {
        if position == buffer.count {
            var chunk = [UInt8](repeating: 0, count: 65_536)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { throw Failure(description: "Redis connection lost") }
            buffer = Array(chunk[..<n]); position = 0
        }
        defer { position += 1 }
        return buffer[position]
    }

    private func line() throws -> String {
        var bytes: [UInt8] = []
        while true {
            let b = try byte()
            if b == 13 { _ = try byte(); return String(decoding: bytes, as: UTF8.self) }
            bytes.append(b)
        }
    }

    private func read() throws -> Reply {
        let kind = try byte()
        let text = try line()
        switch kind {
        case UInt8(ascii: "+"): return .text(text)
        case UInt8(ascii: "-"): return .error(text)
        case UInt8(ascii: ":"): return .integer(Int(text) ?? 0)
        case UInt8(ascii: "$"):
            guard let n = Int(text), n >= 0 else { return .bulk(nil) }
            var bytes: [UInt8] = []
            bytes.reserveCapacity(n)
            for _ in 0..<n { bytes.append(try byte()) }
            _ = try byte(); _ = try byte()
            return .bulk(bytes)
        case UInt8(ascii: "*"):
            guard let n = Int(text), n >= 0 else { return .array(nil) }
            return .array(try (0..<n).map { _ in try read() })
        default: throw Failure(description: "unexpected Redis reply")
        }
    }
}
