import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The one client services call out with: a request over http or https (TLS through Foundation's client), for
/// auth's keys and revoked sessions, Google's keys, YouTube's API, the payment provider. Blocks the calling thread,
/// at most `timeout`.
public enum Fetch {
    /// The status and body, or nil when nothing answered in time (or `url` is not http or https).
    public static func get(_ url: URL, headers: [String: String] = [:], timeout: TimeInterval = 10) -> (status: Int, body: Data)? {
        send("GET", url, headers: headers, body: nil, timeout: timeout)
    }

    /// `method` with `body`: the status and body, or nil when nothing answered in time (the far end may still have
    /// acted: a caller that must know asks again, under the same idempotency key).
    public static func send(_ method: String, _ url: URL, headers: [String: String] = [:], body: Data?,
                            timeout: TimeInterval = 10) -> (status: Int, body: Data)? {
        guard ["http", "https"].contains(url.scheme?.lowercased() ?? "") else { return nil }
        final class Box: @unchecked Sendable { var result: (Int, Data)? }  // `@unchecked Sendable`: written before `done` signals, read after.
        let box = Box(), done = DispatchSemaphore(value: 0)
        var request = URLRequest(url: url)
        request.httpMethod = method
        request.httpBody = body
        request.timeoutInterval = timeout
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        URLSession.shared.dataTask(with: request) { data, response, _ in
            if let http = response as? HTTPURLResponse { box.result = (http.statusCode, data ?? Data()) }
            done.signal()
        }.resume()
        return done.wait(timeout: .now() + timeout + 1) == .success ? box.result : nil
    }
}

/// Why a call out got no usable answer.
public struct FetchError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
