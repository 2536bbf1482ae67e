import CCurl
import Foundation

/// One HTTP/2 connection to a push provider (APNs, FCM) held open across requests: a libcurl easy handle kept for
/// the life of a sender loop, so its connection (TLS and all) is reused for every message, as Apple asks ("keep
/// your connections with APNs open across multiple notifications"). `https://` negotiates HTTP/2 by ALPN;
/// `http://` (a local stand-in) speaks it with prior knowledge (h2c), or HTTP/1.1 when `cleartextHTTP2` is false.
/// Each request is bounded by `timeout`; `caFile` names the certificates to trust instead of the system's.
///
/// libcurl before 8.0 (Debian 12 has 7.88.1) cannot reuse a prior-knowledge h2c connection (curl/curl#10643: the
/// second request is never sent), so over `http://` with HTTP/2 each request opens a connection of its own. Over
/// TLS, as with Apple, the connection is reused.
///
/// `@unchecked Sendable`: the easy handle is used under `lock` only.
public final class HTTP2Connection: @unchecked Sendable {
    /// An answer: the status, the response headers (names lower-case) and the body (its first 64 KB).
    public struct Answer: Sendable {
        public let status: Int
        public let headers: [String: String]
        public let body: [UInt8]
        /// `Retry-After` in seconds, when given as such.
        public var retryAfter: TimeInterval? { headers["retry-after"].flatMap(Int.init).map(TimeInterval.init) }
    }

    private let timeout: Int
    private let cleartextHTTP2: Bool
    private let caFile: String?
    private let lock = NSLock()
    private let handle: UnsafeMutableRawPointer

    private static let initialised: Bool = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK }()

    public init(timeout: Int = 10, cleartextHTTP2: Bool = true, caFile: String? = nil) throws {
        guard Self.initialised, let handle = curl_easy_init() else { throw PushClientError("libcurl could not start") }
        self.timeout = timeout
        self.cleartextHTTP2 = cleartextHTTP2
        self.caFile = caFile
        self.handle = handle
    }

    deinit { curl_easy_cleanup(handle) }

    /// `method` `url` with `headers` and `body`; the answer, or a description of why none came (no connection, a
    /// timeout, an option libcurl refused).
    public func send(_ method: String, _ url: String, headers: [String: String], body: [UInt8]) -> Result<Answer, PushClientError> {
        lock.lock()
        defer { lock.unlock() }
        let collected = Collected()
        let box = Unmanaged.passRetained(collected)
        defer { box.release() }
        var list: UnsafeMutablePointer<curl_slist>?
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) { list = curl_slist_append(list, "\(name): \(value)") }
        list = curl_slist_append(list, "Expect:")
        defer { curl_slist_free_all(list) }
        let h = handle
        // A reset keeps the handle's connection cache: the next request goes over the same connection.
        curl_easy_reset(h)
        var failed: CURLcode = CURLE_OK
        func set(_ result: CURLcode) { if failed == CURLE_OK { failed = result } }
        let cleartext = url.lowercased().hasPrefix("http://")
        set(shim_curl_set_string(h, CURLOPT_URL, url))
        set(shim_curl_set_string(h, CURLOPT_PROTOCOLS_STR, "http,https"))
        let version = !cleartext ? CURL_HTTP_VERSION_2TLS : cleartextHTTP2 ? CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE : CURL_HTTP_VERSION_1_1
        set(shim_curl_set_long(h, CURLOPT_HTTP_VERSION, Int(version)))
        if cleartext && cleartextHTTP2 { set(shim_curl_set_long(h, CURLOPT_FORBID_REUSE, 1)) }
        if let caFile { set(shim_curl_set_string(h, CURLOPT_CAINFO, caFile)) }
        set(shim_curl_set_string(h, CURLOPT_CUSTOMREQUEST, method))
        if method == "POST" { set(shim_curl_set_long(h, CURLOPT_POST, 1)) }
        set(shim_curl_set_list(h, CURLOPT_HTTPHEADER, list))
        set(shim_curl_set_data_function(h, CURLOPT_WRITEFUNCTION, collectAnswerBody))
        set(shim_curl_set_pointer(h, CURLOPT_WRITEDATA, box.toOpaque()))
        set(shim_curl_set_data_function(h, CURLOPT_HEADERFUNCTION, collectAnswerHeader))
        set(shim_curl_set_pointer(h, CURLOPT_HEADERDATA, box.toOpaque()))
        set(shim_curl_set_long(h, CURLOPT_TIMEOUT, timeout))
        set(shim_curl_set_long(h, CURLOPT_CONNECTTIMEOUT, min(timeout, 5)))
        set(shim_curl_set_long(h, CURLOPT_NOSIGNAL, 1))
        guard failed == CURLE_OK else { return .failure(PushClientError("libcurl refused an option: \(String(cString: curl_easy_strerror(failed)))")) }
        let result = body.withUnsafeBufferPointer { b -> CURLcode in
            if method == "POST" {
                _ = shim_curl_set_size(h, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(b.count))
                // No body: an empty one copied (without POSTFIELDS libcurl would read the body from stdin).
                if let base = b.baseAddress {
                    _ = shim_curl_set_pointer(h, CURLOPT_POSTFIELDS, UnsafeMutableRawPointer(mutating: base))
                } else {
                    _ = shim_curl_set_string(h, CURLOPT_COPYPOSTFIELDS, "")
                }
            }
            return curl_easy_perform(h)
        }
        guard result == CURLE_OK else { return .failure(PushClientError(String(cString: curl_easy_strerror(result)))) }
        return .success(Answer(status: shim_curl_response_code(h), headers: collected.headers, body: collected.body))
    }
}

private final class Collected {
    var body: [UInt8] = []
    var headers: [String: String] = [:]
}

private func collectAnswerBody(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?) -> Int {
    guard let data, let context else { return 0 }
    let collected = Unmanaged<Collected>.fromOpaque(context).takeUnretainedValue()
    let n = size * count
    let room = max(0, 65_536 - collected.body.count)
    if room > 0 { collected.body += UnsafeRawBufferPointer(start: data, count: min(n, room)) }
    return n
}

private func collectAnswerHeader(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?) -> Int {
    guard let data, let context else { return 0 }
    let n = size * count
    let collected = Unmanaged<Collected>.fromOpaque(context).takeUnretainedValue()
    let line = String(decoding: UnsafeRawBufferPointer(start: data, count: n), as: UTF8.self)
    if line.hasPrefix("HTTP/") {
        collected.headers = [:]  // a new answer (after an interim one)
    } else if let colon = line.firstIndex(of: ":") {
        collected.headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespacesAndNewlines)
    }
    return n
}
