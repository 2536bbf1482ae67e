import CCurl
import Foundation

/// An SMTP server to send through, as an operator configures it.
public struct SMTPSettings: Sendable {
    /// `smtp://host:port` (upgraded with STARTTLS) or `smtps://host:port` (TLS from the first byte).
    public var url: String
    public var username: String?
    public var password: String?
    /// STARTTLS required (the default): nothing is sent, credentials included, over a connection the server did not
    /// upgrade. Off only for a mail sink on the same machine.
    public var requireTLS: Bool
    /// The certificate authorities to trust for the server (a private CA's file); nil: the system's.
    public var caFile: String?
    /// The whole exchange, in seconds: a slow server cannot hold a sender longer.
    public var timeout: Int

    public init(url: String, username: String? = nil, password: String? = nil, requireTLS: Bool = true, caFile: String? = nil,
                timeout: Int = 30) {
        self.url = url; self.username = username; self.password = password; self.requireTLS = requireTLS
        self.caFile = caFile; self.timeout = timeout
    }
}

/// Why a message was not sent: `temporary` failures (the server unreachable or slow, a 4xx reply) may succeed
/// later; `permanent` ones (a 5xx reply, refused credentials, no TLS where it is required) will not by trying again.
public enum MailError: Error, Equatable, CustomStringConvertible {
    case invalid(String)
    case temporary(String)
    case permanent(String)

    public var description: String {
        switch self {
        case .invalid(let m): return "invalid message: \(m)"
        case .temporary(let m): return "temporary failure: \(m)"
        case .permanent(let m): return "permanent failure: \(m)"
        }
    }
}

/// Sends mail over SMTP with libcurl, the SMTP client Debian ships with the OpenSSL the services already use: it
/// speaks STARTTLS and AUTH (PLAIN, LOGIN and the rest), and a client keeps its handle, so that libcurl may reuse
/// the connection for the next message.
/// One message at a time per client (a lock): a sender wanting more at once holds more clients.
///
/// `@unchecked Sendable`: the easy handle is used under `lock` only.
public final class SMTPClient: @unchecked Sendable {
    private let settings: SMTPSettings
    private let lock = NSLock()
    private let handle: UnsafeMutableRawPointer

    private static let initialised: Bool = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK }()

    public init(_ settings: SMTPSettings) throws {
        guard settings.url.hasPrefix("smtp://") || settings.url.hasPrefix("smtps://") else {
            throw MailError.invalid("the SMTP URL must start with smtp:// or smtps://")
        }
        guard Self.initialised, let handle = curl_easy_init() else { throw MailError.temporary("libcurl could not start") }
        self.settings = settings
        self.handle = handle
    }

    deinit { curl_easy_cleanup(handle) }

    /// Sends `message` to its one recipient; returns when the server accepted it (250 after the data).
    public func send(_ message: MailMessage) throws {
        let bytes = try message.rendered()
        lock.lock()
        defer { lock.unlock() }
        let upload = Upload(bytes)
        let box = Unmanaged.passRetained(upload)
        defer { box.release() }
        var recipients: UnsafeMutablePointer<curl_slist>?
        recipients = curl_slist_append(recipients, "<\(message.to.address)>")
        defer { curl_slist_free_all(recipients) }

        let h = handle
        var failed: CURLcode = CURLE_OK
        func set(_ result: CURLcode) { if failed == CURLE_OK { failed = result } }
        set(shim_curl_set_string(h, CURLOPT_URL, settings.url))
        set(shim_curl_set_string(h, CURLOPT_MAIL_FROM, "<\(message.envelopeFrom)>"))
        set(shim_curl_set_list(h, CURLOPT_MAIL_RCPT, recipients))
        set(shim_curl_set_long(h, CURLOPT_UPLOAD, 1))
        set(shim_curl_set_long(h, CURLOPT_INFILESIZE_LARGE, Int(bytes.count)))
        set(shim_curl_set_read_function(h, readMessage))
        set(shim_curl_set_pointer(h, CURLOPT_READDATA, box.toOpaque()))
        set(shim_curl_set_long(h, CURLOPT_USE_SSL, settings.requireTLS ? Int(CURLUSESSL_ALL.rawValue) : Int(CURLUSESSL_TRY.rawValue)))
        set(shim_curl_set_long(h, CURLOPT_TIMEOUT, settings.timeout))
        set(shim_curl_set_long(h, CURLOPT_CONNECTTIMEOUT, min(settings.timeout, 10)))
        set(shim_curl_set_long(h, CURLOPT_NOSIGNAL, 1))
        if let caFile = settings.caFile { set(shim_curl_set_string(h, CURLOPT_CAINFO, caFile)) }
        if let username = settings.username, let password = settings.password {
            set(shim_curl_set_string(h, CURLOPT_USERNAME, username))
            set(shim_curl_set_string(h, CURLOPT_PASSWORD, password))
        }
        guard failed == CURLE_OK else { throw MailError.permanent("libcurl refused an option: \(Self.text(failed))") }
        let result = curl_easy_perform(h)
        let reply = shim_curl_response_code(h)
        guard result != CURLE_OK else { return }
        throw Self.classify(result, reply: reply)
    }

    /// A failure, by libcurl's code and the server's last reply.
    static func classify(_ result: CURLcode, reply: Int) -> MailError {
        let what = Self.text(result) + (reply > 0 ? " (the server said \(reply))" : "")
        switch result {
        case CURLE_LOGIN_DENIED: return .permanent("the SMTP server refused the credentials: \(what)")
        case CURLE_USE_SSL_FAILED: return .permanent("the SMTP server does not offer STARTTLS: \(what)")
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE: return .permanent("the server's certificate is not trusted: \(what)")
        case CURLE_UNSUPPORTED_PROTOCOL, CURLE_URL_MALFORMAT: return .permanent(what)
        default: return (500...599).contains(reply) ? .permanent(what) : .temporary(what)
        }
    }

    private static func text(_ code: CURLcode) -> String { String(cString: curl_easy_strerror(code)) }
}

/// The rendered message being read by libcurl.
private final class Upload {
    let bytes: [UInt8]
    var offset = 0
    init(_ bytes: [UInt8]) { self.bytes = bytes }
}

/// libcurl's read callback: the next piece of the message.
private func readMessage(_ buffer: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?) -> Int {
    guard let buffer, let context else { return 0 }
    let upload = Unmanaged<Upload>.fromOpaque(context).takeUnretainedValue()
    let n = min(size * count, upload.bytes.count - upload.offset)
    guard n > 0 else { return 0 }
    upload.bytes.withUnsafeBufferPointer { source in
        UnsafeMutableRawPointer(buffer).copyMemory(from: source.baseAddress! + upload.offset, byteCount: n)
    }
    upload.offset += n
    return n
}
