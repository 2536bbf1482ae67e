import CLibPQ
import Foundation
import Synchronization

/// Looks the database's host name up within the connect timeout.
///
/// libpq looks a host name up with the system's resolver before its `connect_timeout` starts, and nothing bounds that
/// wait: it lasts as long as the resolver retries. Seen here: 5 to 20 s while podman's DNS server reloaded for a
/// container that stopped beside ours; a service that opened a connection then was stuck that long (a request, or a
/// stop: notify was killed at the end of its grace period). So the name is looked up here, on a thread of its own that
/// is left behind when the time is up, and libpq is given the addresses (`hostaddr`), keeping the name (`host`) for
/// TLS, passwords and its messages. Callers wanting the same name at once share one lookup; nothing is cached.
enum HostLookup {
    /// The settings that point libpq at the addresses of the host `url` names, looked up within the URL's
    /// `connect_timeout` (else `timeoutSeconds`). None when there is nothing to look up: no host, a socket directory,
    /// an address, several hosts, a `hostaddr` of its own, or no timeout (`connect_timeout=0`).
    /// Throws `.unavailable` when the name does not resolve, or not in time.
    static func settings(url: String, timeoutSeconds: Int) throws -> [(String, String)] {
        guard let options = PQconninfoParse(url, nil) else { return [] }  // libpq says what is wrong with it
        var values: [String: String] = [:]
        var option = options
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val { values[String(cString: keyword)] = String(cString: value) }
            option += 1
        }
        PQconninfoFree(options)
        guard let host = values["host"], !host.isEmpty, values["hostaddr"] ?? "" == "", !host.contains(","),
              !host.hasPrefix("/"), !host.hasPrefix("@"), !isAddress(host) else { return [] }
        let timeout = values["connect_timeout"].flatMap { Int($0.trimmingCharacters(in: .whitespaces)) } ?? timeoutSeconds
        guard timeout > 0 else { return [] }
        let addresses = try lookUp(host, within: TimeInterval(timeout))
        return [("host", Array(repeating: host, count: addresses.count).joined(separator: ",")),
                ("hostaddr", addresses.joined(separator: ","))]
    }

    /// One lookup in progress, which the callers wanting its name wait for.
    private final class Pending: @unchecked Sendable {  // `result` is guarded by `condition`
        let condition = NSCondition()
        var result: Result<[String], PostgresError>?
    }

    private static let pending = Mutex<[String: Pending]>([:])

    /// The addresses of `host` in the resolver's order, or `.unavailable` when it has none or did not answer in time.
    static func lookUp(_ host: String, within seconds: TimeInterval) throws -> [String] {
        let deadline = Date().addingTimeInterval(seconds)
        let (lookup, isNew) = pending.withLock { all -> (Pending, Bool) in
            if let lookup = all[host] { return (lookup, false) }
            let lookup = Pending()
            all[host] = lookup
            return (lookup, true)
        }
        if isNew {
            let thread = Thread {
                let result = resolve(host)
                pending.withLock { _ = $0.removeValue(forKey: host) }
                lookup.condition.lock(); lookup.result = result; lookup.condition.broadcast(); lookup.condition.unlock()
            }
            thread.name = "host-lookup"
            thread.start()
        }
        lookup.condition.lock(); defer { lookup.condition.unlock() }
        while lookup.result == nil && lookup.condition.wait(until: deadline) {}
        guard let result = lookup.result else {
            throw unresolved(host, "no answer within \(Int(seconds)) s")
        }
        return try result.get()
    }

    private static func resolve(_ host: String) -> Result<[String], PostgresError> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, nil, &hints, &list)
        guard status == 0 else {
            return .failure(unresolved(host, String(cString: gai_strerror(status))))
        }
        defer { freeaddrinfo(list) }
        var addresses: [String] = []
        var entry = list
        while let info = entry {
            var text = [CChar](repeating: 0, count: 1025)  // NI_MAXHOST
            if getnameinfo(info.pointee.ai_addr, info.pointee.ai_addrlen, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST) == 0 {
                let address = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                if !addresses.contains(address) { addresses.append(address) }
            }
            entry = info.pointee.ai_next
        }
        guard !addresses.isEmpty else {
            return .failure(unresolved(host, "no address"))
        }
        return .success(addresses)
    }

    /// libpq's own words for a name it cannot look up, and why.
    private static func unresolved(_ host: String, _ why: String) -> PostgresError {
        PostgresError(kind: .unavailable, serverMessage: "could not translate host name \"\(host)\" to address: \(why)")
    }

    private static func isAddress(_ text: String) -> Bool {
        var v4 = in_addr(), v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }
}
