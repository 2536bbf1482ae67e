#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// IP addresses and ranges (`172.30.80.80`, `10.244.0.0/16`, `fd00::/8`): the proxies a service trusts. On
/// Kubernetes the gateway's pods have no fixed address, so a range (the pod network's) names them.
public struct AddressSet: Sendable, Equatable, ExpressibleByArrayLiteral {
    private struct Range: Sendable, Equatable {
        let bytes: [UInt8]
        let prefix: Int

        func contains(_ address: [UInt8]) -> Bool {
            guard address.count == bytes.count else { return false }
            var left = prefix, i = 0
            while left > 0 {
                let mask: UInt8 = left >= 8 ? 0xFF : ~(0xFF >> UInt8(left))
                guard address[i] & mask == bytes[i] & mask else { return false }
                left -= 8; i += 1
            }
            return true
        }
    }

    private var ranges: [Range] = []

    public init() {}

    /// For code and tests that name entries they know to be well formed; a malformed one traps.
    public init(arrayLiteral elements: String...) {
        for element in elements { precondition(insert(element), "not an IP address or range: \(element)") }
    }

    public var isEmpty: Bool { ranges.isEmpty }

    /// Adds an address or a CIDR range; false (and nothing added) when it is neither.
    @discardableResult
    public mutating func insert(_ text: String) -> Bool {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let bytes = Self.bytes(String(parts[0])) else { return false }
        var prefix = bytes.count * 8
        if parts.count == 2 {
            guard let bits = Int(parts[1]), parts[1].allSatisfy(\.isASCII), (0...prefix).contains(bits) else { return false }
            prefix = bits
        }
        ranges.append(Range(bytes: bytes, prefix: prefix))
        return true
    }

    /// Whether `address` (as the server names a peer: IPv4 clients of a dual-stack socket as IPv4) is in the set.
    public func contains(_ address: String) -> Bool {
        guard !ranges.isEmpty, let bytes = Self.bytes(address) else { return false }
        return ranges.contains { $0.contains(bytes) }
    }

    /// The client a request comes from: `peer`, or, when `peer` is in the set (a trusted proxy), the last address in
    /// `forwardedFor` (the request's `X-Forwarded-For`) that is not (entries before it could be forged by the
    /// client); the peer when that entry is no IP address or there is none.
    public func client(peer: String, forwardedFor: String?) -> String {
        guard let forwardedFor, contains(peer) else { return peer }
        for var hop in forwardedFor.split(separator: ",").reversed() {
            while hop.first == " " || hop.first == "\t" { hop = hop.dropFirst() }
            while hop.last == " " || hop.last == "\t" { hop = hop.dropLast() }
            let address = String(hop)
            if contains(address) { continue }
            return Self.bytes(address) == nil ? peer : address
        }
        return peer
    }

    private static func bytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }
}
