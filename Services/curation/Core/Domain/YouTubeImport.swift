import Foundation
import HTTP
import Postgres

/// Adds videos to a topic from the YouTube Data API v3: `search.list` for the query (page after page), then
/// `videos.list` for their titles, descriptions, channels and durations, and `captions.list` to learn whether
/// captions exist (their text needs the owner's OAuth consent, so it stays unknown). New videos go after the
/// topic's last one, in search order; re-running updates and never duplicates.
struct YouTubeImport: Sendable {
    let pool: Pool
    let storage: CurationStorage
    /// The API's base URL (`YOUTUBE_API_URL`, default `https://www.googleapis.com/youtube/v3`).
    let base: URL
    let key: String

    /// The quota ran out, or the key was refused: what was imported so far stays.
    struct Refused: Error, CustomStringConvertible {
        let reason: String
        let status: Int
        var description: String { "YouTube refused the request (\(status) \(reason))" }
        var isQuota: Bool { ["quotaExceeded", "dailyLimitExceeded", "rateLimitExceeded", "userRateLimitExceeded"].contains(reason) }
    }

    struct Report: Sendable { var found = 0; var added = 0; var updated = 0; var unchanged = 0; var withCaptions = 0 }

    /// Imports up to `limit` videos found for `query` into `topic`; `progress` is told after each page.
    func run(topic: UUID, query: String, limit: Int, progress: (Report) -> Void = { _ in }) throws -> Report {
        guard let place = try pool.withConnection({ try storage.topicPlace($0, topic) }) else { throw CurationError.notFound }
        var report = Report()
        var pageToken: String?
        repeat {
            var search = ["part": "snippet", "type": "video", "maxResults": String(min(50, limit - report.found)), "q": query]
            if let pageToken { search["pageToken"] = pageToken }
            let page = try call("search", search)
            pageToken = page["nextPageToken"] as? String
            let ids = (page["items"] as? [[String: Any]] ?? []).compactMap { ($0["id"] as? [String: Any])?["videoId"] as? String }
            guard !ids.isEmpty else { break }
            let details = try call("videos", ["part": "snippet,contentDetails", "id": ids.joined(separator: ",")])
            var entries: [CatalogueEntry] = []
            for item in details["items"] as? [[String: Any]] ?? [] {
                guard let id = item["id"] as? String, let snippet = item["snippet"] as? [String: Any],
                      let title = snippet["title"] as? String else { continue }
                let captions = try call("captions", ["part": "snippet", "videoId": id])
                if !(captions["items"] as? [Any] ?? []).isEmpty { report.withCaptions += 1 }
                let duration = ((item["contentDetails"] as? [String: Any])?["duration"] as? String).flatMap(Self.seconds) ?? 0
                entries.append(CatalogueEntry(youtubeId: id, title: String(title.prefix(300)), description: snippet["description"] as? String ?? "",
                                              durationSeconds: duration, channel: snippet["channelTitle"] as? String ?? "YouTube",
                                              partnerContent: false, subject: place.subject, topic: place.topic, subtopic: query,
                                              path: [place.subject, place.topic, query], parentDescription: "", captions: nil,
                                              sourceUrl: "https://www.youtube.com/watch?v=\(id)", license: nil))
            }
            try pool.withTransaction { c in
                for entry in entries where Catalogue.problem(entry) == nil {
                    let position = try storage.position(c, of: entry.youtubeId, in: topic) ?? storage.nextPosition(c, in: topic)
                    switch try storage.upsertVideo(c, entry, topic: topic, position: position) {
                    case true?: report.added += 1
                    case false?: report.updated += 1
                    case nil: report.unchanged += 1
                    }
                }
            }
            report.found += ids.count
            progress(report)
        } while pageToken != nil && report.found < limit
        return report
    }

    /// One API call; the JSON object it answered, or `Refused` for an error the API explains.
    private func call(_ resource: String, _ parameters: [String: String]) throws -> [String: Any] {
        var components = URLComponents(url: base.appendingPathComponent(resource), resolvingAgainstBaseURL: false)!
        components.queryItems = (parameters.merging(["key": key]) { a, _ in a }).sorted { $0.key < $1.key }.map { URLQueryItem(name: $0.key, value: $0.value) }
        guard let url = components.url, let (status, body) = Fetch.get(url, timeout: 15) else {
            throw Refused(reason: "unreachable", status: 0)
        }
        let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:]
        guard status == 200 else {
            let error = object["error"] as? [String: Any]
            let reason = ((error?["errors"] as? [[String: Any]])?.first?["reason"] as? String) ?? (error?["status"] as? String) ?? "error"
            throw Refused(reason: reason, status: status)
        }
        return object
    }

    /// Seconds of an ISO 8601 duration as YouTube gives it (`PT1H2M3S`, `P1DT2H`).
    static func seconds(_ iso: String) -> Int? {
        guard iso.hasPrefix("P") else { return nil }
        var total = 0, number = 0, inTime = false
        for ch in iso.dropFirst() {
            switch ch {
            case "T": inTime = true
            case "0"..."9": number = number * 10 + Int(String(ch))!
            case "D": total += number * 86_400; number = 0
            case "H": total += number * 3600; number = 0
            case "M": total += number * (inTime ? 60 : 2_592_000); number = 0
            case "S": total += number; number = 0
            case "W": total += number * 604_800; number = 0
            default: return nil
            }
        }
        return total
    }
}
