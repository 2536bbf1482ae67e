import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A GET over http or https (TLS through Foundation's client), for the few calls a service makes to the outside
/// (Google's keys, YouTube's API). Blocks the calling thread, at most `timeout`.
public enum Fetch {
    /// The status and body, or nil when nothing answered in time.
    public static func get(_ url: URL, timeout: TimeInterval = 10) -> (status: Int, body: Data)? {
        final class Box: @unchecked Sendable { var result: (Int, Data)? }  // `@unchecked Sendable`: written before `done` signals, read after.
        let box = Box(), done = DispatchSemaphore(value: 0)
        var request = URLRequest(url: url)
        request.timeoutInterval = timeout
        URLSession.shared.dataTask(with: request) { data, response, _ in
            if let http = response as? HTTPURLResponse { box.result = (http.statusCode, data ?? Data()) }
            done.signal()
        }.resume()
        return done.wait(timeout: .now() + timeout + 1) == .success ? box.result : nil
    }
}
