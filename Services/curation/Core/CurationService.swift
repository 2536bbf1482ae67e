import Features
import Foundation
import Models
import Runtime
import ServiceKit
import Web

/// The curation service: subjects, topics and videos, topic-locked recommendations, likes, comments, playlists
/// (port 8085, schema `curation`). `curation import FILE.jsonl` loads a catalogue.
public enum CurationService {
    /// Curation's own settings, read and checked before anything starts.
    struct Settings {
        /// `CATALOGUE_REFRESH_SECONDS` (default 30): how often the recommendation index looks for catalogue changes.
        let refreshSeconds: Int
        /// `OPERATOR_TOKEN`: the moderators' credential; enables the queue of reports.
        let moderators: SharedSecret

        init(_ environment: Environment) throws {
            refreshSeconds = try environment.int("CATALOGUE_REFRESH_SECONDS", default: 30, range: 1...3600)
            moderators = try SharedSecret.operatorToken(environment)
        }
    }

    /// The service configured from `environment` (a bad setting throws, naming it); `run()` serves it.
    public static func makeApp(environment: Environment = Environment()) throws -> ServiceApp {
        let settings = try Settings(environment)
        let urls = try MediaURLs(environment, defaultPort: 8085)
        return try ServiceApp(service: "curation", defaultPort: 8085, environment: environment, migrations: migrations,
                              commands: [importCommand, youtubeCommand]) { app in
            let storage = CurationStorage()
            let recommender = Recommender()
            let pool = app.pool
            /// Rebuilds the index when the catalogue changed (an import while running, another instance's).
            let refresh: @Sendable () throws -> Void = {
                var built: Int?
                do {  // the catalogue's rows end with this scope
                    let (version, videos) = try pool.withConnection { c -> (String, [VideoRecord]?) in
                        let version = try storage.catalogueVersion(c)
                        return (version, version == recommender.version ? nil : try storage.catalogue(c))
                    }
                    if let videos { recommender.rebuild(videos, version: version); built = videos.count }
                }
                if let built {
                    ServiceApp.releaseFreedMemory()  // the rows and the build's words
                    app.logger.info("recommendation index built", ["videos": .int(built)])
                }
            }
            try refresh()
            app.add(Job.every(Double(settings.refreshSeconds), "catalogue-refresh", logger: app.logger, refresh))
            app.add(Job.every(3600, "delete-old-scrolls", logger: app.logger) { try pool.withConnection { try storage.deleteOldScrolls($0) } })
            app.consume("profiles") { events in
                events.on([UserDeleted.self], AccountErasure().userDeleted)
                events.on([UserBlocked.self, UserUnblocked.self]) { event, c in try Blocks(schema: "curation").apply(event, on: c) }
                events.on([UserRegistered.self, UserUpdated.self]) { event, c in try Profiles(schema: "curation").apply(event, on: c) }
            }
            let verifier = app.makeTokenVerifier()
            let handlers = CurationHandlers(pool: pool, outbox: app.outbox, idempotency: app.idempotency, recommender: recommender,
                                            verifier: verifier, urls: urls)
            return makeRoutes(handlers, verifier, moderators: settings.moderators, services: app.config.serviceToken)
        }
    }

    /// `curation import-youtube --topic ID --query Q [--limit N]`: adds up to N (default 50) videos YouTube finds for
    /// Q to the topic, with `YOUTUBE_API_KEY` (and `YOUTUBE_API_URL`, Google's by default). Exits 0 when done, 75 when
    /// the quota ran out (what was imported stays), 77 when the key was refused, 64 on bad arguments.
    static let youtubeCommand = Command("import-youtube", usage: "import-youtube --topic ID --query Q [--limit N]") { app, arguments in
        var options: [String: String] = [:]
        var i = 0
        while i + 1 < arguments.count, ["--topic", "--query", "--limit"].contains(arguments[i]) {
            options[arguments[i]] = arguments[i + 1]; i += 2
        }
        guard i == arguments.count, let topic = options["--topic"].flatMap(UUID.init(uuidString:)),
              let query = options["--query"], (1...200).contains(query.count),
              let limit = Int(options["--limit"] ?? "50"), (1...5000).contains(limit) else {
            app.logger.error("usage: curation import-youtube --topic <topic id> --query <words> [--limit 1-5000]")
            return 64
        }
        guard let key = app.config.environment.optional("YOUTUBE_API_KEY") else {
            app.logger.error("invalid configuration: YOUTUBE_API_KEY is required by import-youtube")
            return 78
        }
        let base = URL(string: app.config.environment.string("YOUTUBE_API_URL", default: "https://www.googleapis.com/youtube/v3"))
        guard let base, ["http", "https"].contains(base.scheme ?? "") else {
            app.logger.error("invalid configuration: YOUTUBE_API_URL must be an http(s) URL")
            return 78
        }
        let importer = YouTubeImport(pool: app.pool, storage: CurationStorage(), base: base, key: key)
        do {
            let report = try importer.run(topic: topic, query: query, limit: limit) { r in
                FileHandle.standardError.write(Data("\rfrom YouTube: \(r.found) found, \(r.added) added, \(r.updated) updated".utf8))
            }
            FileHandle.standardError.write(Data("\n".utf8))
            app.logger.info("imported from YouTube", ["found": .int(report.found), "added": .int(report.added), "updated": .int(report.updated),
                                                      "unchanged": .int(report.unchanged), "withCaptions": .int(report.withCaptions)])
            return 0
        } catch let refused as YouTubeImport.Refused {
            app.logger.error(refused.isQuota ? "the YouTube quota ran out; what was found so far is imported" : "\(refused) (YOUTUBE_API_KEY?)",
                             ["reason": .string(refused.reason)])
            return refused.isQuota ? 75 : 77
        } catch CurationError.notFound {
            app.logger.error("no topic \(topic)")
            return 66
        }
    }

    /// `curation import FILE.jsonl`: loads or updates the catalogue, with progress on the terminal; bad lines are
    /// reported with their numbers and skipped. Exits 0 when every line was imported, 65 when some were skipped.
    static let importCommand = Command("import", usage: "import FILE.jsonl") { app, arguments in
        guard arguments.count == 1 else {
            app.logger.error("usage: curation import FILE.jsonl")
            return 64
        }
        let file = URL(fileURLWithPath: arguments[0])
        guard FileManager.default.isReadableFile(atPath: file.path) else {
            app.logger.error("cannot read \(arguments[0])")
            return 66
        }
        let catalogue = Catalogue(pool: app.pool, storage: CurationStorage())
        let report = try catalogue.importFile(file) { r in
            FileHandle.standardError.write(Data("\rimporting: \(r.lines) lines, \(r.added) added, \(r.updated) updated, \(r.unchanged) unchanged, \(r.skipped.count) skipped".utf8))
        }
        FileHandle.standardError.write(Data("\n".utf8))
        for (line, reason) in report.skipped.prefix(100) {
            app.logger.warn("skipped a line", ["line": .int(line), "reason": .string(reason)])
        }
        app.logger.info("imported the catalogue", ["lines": .int(report.lines), "added": .int(report.added), "updated": .int(report.updated),
                                                   "unchanged": .int(report.unchanged), "skipped": .int(report.skipped.count)])
        return report.skipped.isEmpty ? 0 : 65
    }
}
