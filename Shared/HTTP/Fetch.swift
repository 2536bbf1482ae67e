import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The one client services call out with: a request over http or https (TLS through Foundation's client), for
/// auth's keys and revoked sessions, Google's keys, YouTube's API, the payment provider. Blocks the calling thread,
/// at most `timeout`, or until `abandon` says true (it is asked every 0.1 s: a background job that is being stopped
/// gives up its call at once instead of holding the shutdown for the rest of the timeout).
public enum Fetch {
    /// The status and body, or nil when nothing answered in time (or `url` is not http or https).
    public static func get(_ url: URL, headers: [String: String] = [:], timeout: TimeInterval = 10,
                           abandon: (() -> Bool)? = nil) -> (status: Int, body: Data)? {
        send("GET", url, headers: headers, body: nil, timeout: timeout, abandon: abandon)
    }

    /// `method` with `body`: the status and body, or nil when nothing answered in time (the far end may still have
    /// acted: a caller that must know asks again, under the same idempotency key). `uncached`: the answer is never taken from
    /// the client's cache (an object store's objects, which change and go).
    public static func send(_ method: String, _ url: URL, headers: [String: String] = [:], body: Data?,
                            timeout: TimeInterval = 10, uncached: Bool = false,
                            abandon: (() -> Bool)? = nil) -> (status: Int, body: Data)? {
        guard ["http", "https"].contains(url.scheme?.lowercased() ?? "") else { return nil }
        final class Box: @unchecked Sendable { var result: (Int, Data)? }  // `@unchecked Sendable`: written before `done` signals, read after.
        let box = Box(), done = DispatchSemaphore(value: 0), task = Mutex<(made: URLSessionDataTask?, given: Bool)>((nil, false))
        var request = URLRequest(url: url)
        request.httpMethod = method
        request.httpBody = body
        request.timeoutInterval = timeout
        if uncached { request.cachePolicy = .reloadIgnoringLocalCacheData }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        // The session is driven from another thread, and so is a cancellation: Foundation's session can hold its
        // callers while it waits on a call of its own (a stopping service's key refresh, called as auth's container
        // went, kept its job 7 s past the stop it was asked for). The caller only waits, and leaves when it must.
        let started = request
        DispatchQueue.global().async {
            let made = URLSession.shared.dataTask(with: started) { data, response, _ in
                if let http = response as? HTTPURLResponse { box.result = (http.statusCode, data ?? Data()) }
                done.signal()
            }
            // Given up before it was made: never sent.
            if task.withLock({ $0.made = made; return $0.given }) { made.cancel() } else { made.resume() }
        }
        let end = DispatchTime.now() + timeout + 1
        while done.wait(timeout: min(end, .now() + 0.1)) == .timedOut {
            if DispatchTime.now() >= end || abandon?() == true {
                DispatchQueue.global().async { task.withLock { $0.given = true; return $0.made }?.cancel() }
                return nil
            }
        }
        return box.result
    }
}

/// Why a call out got no usable answer.
public struct FetchError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
