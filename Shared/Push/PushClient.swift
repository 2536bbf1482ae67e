import CCurl
import Foundation

/// How a push service answered one message (RFC 8030 §5, RFC 8292).
public enum PushOutcome: Equatable, Sendable {
    /// 201: accepted for delivery.
    case accepted
    /// 404 or 410: the subscription is gone; forget it.
    case gone
    /// 429, 5xx or no answer: try again, after `retryAfter` seconds when the service said.
    case retry(String, retryAfter: TimeInterval?)
    /// Any other answer (400, 401, 403, 413): this message will not be taken by trying again.
    case rejected(String)
}

/// One message to a push service: its body (encrypted), and the headers RFC 8030 defines.
public struct PushRequest: Sendable {
    public var endpoint: String
    public var body: [UInt8]
    /// `TTL`: how long, in seconds, the service keeps it for a device that is offline.
    public var ttl: Int
    /// `Urgency`: `very-low`, `low`, `normal` or `high`.
    public var urgency: String
    /// `Topic`: a newer message with the same topic replaces an undelivered older one (at most 32 base64url characters).
    public var topic: String?
    /// `Authorization`: the VAPID header.
    public var authorization: String

    public init(endpoint: String, body: [UInt8], ttl: Int, urgency: String, topic: String?, authorization: String) {
        self.endpoint = endpoint; self.body = body; self.ttl = ttl; self.urgency = urgency; self.topic = topic
        self.authorization = authorization
    }
}

/// Posts Web Push messages with libcurl (http and https only, no redirects, the whole exchange bounded by
/// `timeout`). A client keeps its handle, so the connection to a push service is reused for the next message.
/// One message at a time per client (a lock): a sender wanting more at once holds more clients.
///
/// `@unchecked Sendable`: the easy handle is used under `lock` only.
public final class PushClient: @unchecked Sendable {
    private let timeout: Int
    private let caFile: String?
    private let lock = NSLock()
    private let handle: UnsafeMutableRawPointer

    private static let initialised: Bool = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK }()

    public init(timeout: Int = 10, caFile: String? = nil) throws {
        guard Self.initialised, let handle = curl_easy_init() else { throw PushClientError("libcurl could not start") }
        self.timeout = timeout
        self.caFile = caFile
        self.handle = handle
    }

    deinit { curl_easy_cleanup(handle) }

    public func send(_ request: PushRequest) -> PushOutcome {
        lock.lock()
        defer { lock.unlock() }
        let response = Response()
        let box = Unmanaged.passRetained(response)
        defer { box.release() }
        var headers: UnsafeMutablePointer<curl_slist>?
        for header in ["Content-Type: application/octet-stream", "Content-Encoding: aes128gcm", "TTL: \(request.ttl)",
                       "Urgency: \(request.urgency)", "Authorization: \(request.authorization)", "Expect:"]
            + (request.topic.map { ["Topic: \($0)"] } ?? []) {
            headers = curl_slist_append(headers, header)
        }
        defer { curl_slist_free_all(headers) }
        let h = handle
        curl_easy_reset(h)
        var failed: CURLcode = CURLE_OK
        func set(_ result: CURLcode) { if failed == CURLE_OK { failed = result } }
        set(shim_curl_set_string(h, CURLOPT_URL, request.endpoint))
        set(shim_curl_set_string(h, CURLOPT_PROTOCOLS_STR, "http,https"))
        set(shim_curl_set_long(h, CURLOPT_POST, 1))
        set(shim_curl_set_list(h, CURLOPT_HTTPHEADER, headers))
        set(shim_curl_set_data_function(h, CURLOPT_WRITEFUNCTION, collectBody))
        set(shim_curl_set_pointer(h, CURLOPT_WRITEDATA, box.toOpaque()))
        set(shim_curl_set_data_function(h, CURLOPT_HEADERFUNCTION, collectHeader))
        set(shim_curl_set_pointer(h, CURLOPT_HEADERDATA, box.toOpaque()))
        set(shim_curl_set_long(h, CURLOPT_TIMEOUT, timeout))
        set(shim_curl_set_long(h, CURLOPT_CONNECTTIMEOUT, min(timeout, 5)))
        set(shim_curl_set_long(h, CURLOPT_NOSIGNAL, 1))
        if let caFile { set(shim_curl_set_string(h, CURLOPT_CAINFO, caFile)) }
        guard failed == CURLE_OK else { return .rejected("libcurl refused an option: \(String(cString: curl_easy_strerror(failed)))") }
        let result = request.body.withUnsafeBufferPointer { body -> CURLcode in
            _ = shim_curl_set_pointer(h, CURLOPT_POSTFIELDS, UnsafeMutableRawPointer(mutating: body.baseAddress))
            _ = shim_curl_set_size(h, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count))
            return curl_easy_perform(h)
        }
        guard result == CURLE_OK else { return .retry(String(cString: curl_easy_strerror(result)), retryAfter: nil) }
        let status = shim_curl_response_code(h)
        let said = "the push service answered \(status)" + (response.body.isEmpty ? "" : ": " + String(decoding: response.body, as: UTF8.self))
        switch status {
        case 200...299: return .accepted
        case 404, 410: return .gone
        case 429, 500...599: return .retry(said, retryAfter: response.retryAfter)
        default: return .rejected(said)
        }
    }
}

public struct PushClientError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// What came back: the first 500 bytes of the body (for the log), and `Retry-After` in seconds.
private final class Response {
    var body: [UInt8] = []
    var retryAfter: TimeInterval?
}

private func collectBody(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?) -> Int {
    guard let data, let context else { return 0 }
    let response = Unmanaged<Response>.fromOpaque(context).takeUnretainedValue()
    let n = size * count
    let room = max(0, 500 - response.body.count)
    if room > 0 { response.body += UnsafeRawBufferPointer(start: data, count: min(n, room)) }
    return n
}

private func collectHeader(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?) -> Int {
    guard let data, let context else { return 0 }
    let n = size * count
    let line = String(decoding: UnsafeRawBufferPointer(start: data, count: n), as: UTF8.self)
    if line.lowercased().hasPrefix("retry-after:") {
        let value = line.dropFirst("retry-after:".count).trimmingCharacters(in: .whitespacesAndNewlines)
        let response = Unmanaged<Response>.fromOpaque(context).takeUnretainedValue()
        if let seconds = Int(value), seconds >= 0 {
            response.retryAfter = TimeInterval(seconds)
        } else if let date = httpDate(value) {
            response.retryAfter = max(0, date.timeIntervalSinceNow)
        }
    }
    return n
}

/// An IMF-fixdate (RFC 9110 §5.6.7), the form of `Retry-After` other than seconds.
private func httpDate(_ text: String) -> Date? {
    let f = DateFormatter()
    f.locale = Locale(identifier: "en_US_POSIX")
    f.timeZone = TimeZone(identifier: "GMT")
    f.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
    return f.date(from: text)
}
