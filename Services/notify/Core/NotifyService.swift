import Features
import Foundation
import Mail
import Models
import Push
import Runtime
import ServiceKit
import Web

/// The notify service: turns events into mail, Web Push and native push (APNs, FCM) messages, once per event, person and channel, with a log of
/// what was sent to whom (port 8086, schema `notify`).
public enum NotifyService {
    /// Notify's own settings, read and checked before anything starts.
    struct Settings {
        /// `SMTP_URL` (`smtp://host:port`, STARTTLS; `smtps://host:port`), `SMTP_USERNAME`, `SMTP_PASSWORD`,
        /// `SMTP_REQUIRE_TLS` (true; false only for a mail sink on the same host), `SMTP_CA_FILE`,
        /// `SMTP_TIMEOUT_SECONDS` (30). Unset: nothing is sent (deliveries wait until it is set).
        let smtp: SMTPSettings?
        /// `MAIL_FROM` and `MAIL_FROM_NAME`: who the mail is from.
        let from: MailAddress
        /// Each app's sender beside `from` (`APP_MAIL_FROM`).
        let appSenders: MailSenders
        /// `MAIL_BOUNCE_ADDRESS` (default `MAIL_FROM`): where bounces go, an address nobody answers from.
        let bounce: String
        /// `MAIL_SENDERS` (4): loops sending side by side, each with its own connection.
        let senders: Int
        let mails: Mails
        /// `VAPID_PRIVATE_KEY` (the 32-byte P-256 scalar, base64url) and, during a rotation, `VAPID_PREVIOUS_PRIVATE_KEY`;
        /// `VAPID_SUBJECT` (default `mailto:` and `MAIL_FROM`). Unset: no Web Push.
        let push: PushKeys?
        /// `PUSH_ALLOWED_ORIGINS`: the push services a subscription may name (default: the browsers').
        let allowed: AllowedOrigins
        /// `PUSH_SENDERS` (4) loops, each exchange bounded by `PUSH_TIMEOUT_SECONDS` (10).
        let pushSenders: Int
        let pushTimeout: Int
        /// Native push: APNs (`APNS_*`) and FCM (`FCM_*`), each off when none of its settings is given.
        let native: NativePush
        let notices: Notices
        /// `STORIES_URL`: where stories answers services (`http://stories:8082`), for the newsletters it mails;
        /// `CHAT_URL` (`http://chat:8083`), for what members of a room have not read.
        let stories: URL?
        let chat: URL?
        let chatWindow: Int
        /// `GROUP_DIGEST_SECONDS` (86400): the window of a group's digest of new stories, at most one per person.
        let digestWindow: Int

        init(_ environment: Environment) throws {
            if let url = environment.optional("SMTP_URL") {
                guard url.hasPrefix("smtp://") || url.hasPrefix("smtps://"), URL(string: url)?.host != nil else {
                    throw ConfigError(variable: "SMTP_URL", problem: "must be smtp://host:port (STARTTLS) or smtps://host:port")
                }
                smtp = SMTPSettings(url: url, username: environment.optional("SMTP_USERNAME"), password: environment.optional("SMTP_PASSWORD"),
                                    requireTLS: try environment.choice("SMTP_REQUIRE_TLS", default: "true", ["true", "false"]) == "true",
                                    caFile: environment.optional("SMTP_CA_FILE"),
                                    timeout: try environment.int("SMTP_TIMEOUT_SECONDS", default: 30, range: 1...300))
            } else {
                smtp = nil
            }
            do {
                from = try MailAddress(environment.string("MAIL_FROM", default: "no-reply@localhost.localdomain"),
                                       name: environment.optional("MAIL_FROM_NAME"))
            } catch {
                throw ConfigError(variable: "MAIL_FROM", problem: "must be an e-mail address (and MAIL_FROM_NAME a line of text)")
            }
            appSenders = try MailSenders(own: from, environment)
            bounce = environment.string("MAIL_BOUNCE_ADDRESS", default: from.address)
            guard (try? MailAddress(bounce)) != nil else { throw ConfigError(variable: "MAIL_BOUNCE_ADDRESS", problem: "must be an e-mail address") }
            senders = try environment.int("MAIL_SENDERS", default: 4, range: 1...64)
            let port = try environment.int("PORT", default: 8086, range: 0...65535)
            let origin = try environment.publicBaseURL(port: port)
            let reset = environment.string("PASSWORD_RESET_URL", default: origin + "/reset-password")
            guard let resetURL = URL(string: reset), ["http", "https"].contains(resetURL.scheme ?? ""), resetURL.host != nil else {
                throw ConfigError(variable: "PASSWORD_RESET_URL", problem: "must be an http(s) URL: the apps' reset-password page")
            }
            mails = Mails(base: origin, resetURL: reset)
            let subject = environment.string("VAPID_SUBJECT", default: "mailto:" + from.address)
            guard subject.hasPrefix("mailto:") || subject.hasPrefix("https://") else {
                throw ConfigError(variable: "VAPID_SUBJECT", problem: "must be a mailto: or https: contact for the push services")
            }
            func vapid(_ name: String) throws -> VAPID? {
                guard let key = environment.optional(name) else { return nil }
                guard let vapid = try? VAPID(privateKey: key, subject: subject) else {
                    throw ConfigError(variable: name, problem: "must be a P-256 private key: 32 bytes in base64url (deploy/local/stack vapid-key prints one)")
                }
                return vapid
            }
            let previous = try vapid("VAPID_PREVIOUS_PRIVATE_KEY")
            push = try vapid("VAPID_PRIVATE_KEY").map { PushKeys(current: $0, previous: previous) }
            allowed = try AllowedOrigins(environment.string("PUSH_ALLOWED_ORIGINS", default: AllowedOrigins.browsers))
            pushSenders = try environment.int("PUSH_SENDERS", default: 4, range: 1...64)
            pushTimeout = try environment.int("PUSH_TIMEOUT_SECONDS", default: 10, range: 1...60)
            native = try NativePush(environment, timeout: pushTimeout)
            func service(_ name: String, _ example: String) throws -> URL? {
                guard let text = environment.optional(name) else { return nil }
                guard let url = URL(string: text), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
                    throw ConfigError(variable: name, problem: "must be an http(s) URL such as \(example)")
                }
                return url
            }
            stories = try service("STORIES_URL", "http://stories:8082")
            chat = try service("CHAT_URL", "http://chat:8083")
            chatWindow = try environment.int("CHAT_WINDOW_SECONDS", default: 180, range: 1...3600)
            digestWindow = try environment.int("GROUP_DIGEST_SECONDS", default: 86_400, range: 1...604_800)
            notices = Notices(offerSeconds: try environment.int("OFFER_TIMEOUT_SECONDS", default: 30, range: 1...3600))
        }
    }

    /// The service configured from `environment` (a bad setting throws, naming it); `run()` serves it.
    public static func makeApp(environment: Environment = Environment()) throws -> ServiceApp {
        let settings = try Settings(environment)
        return try ServiceApp(service: "notify", defaultPort: 8086, environment: environment, migrations: migrations) { app in
            let storage = NotifyStorage()
            let deliveries = Deliveries(storage: storage, mails: settings.mails, notices: settings.notices,
                                        chatWindow: TimeInterval(settings.chatWindow), digestWindow: TimeInterval(settings.digestWindow))
            let erasure = AccountErasure(storage: storage)
            app.consume("mail") { events in
                events.on(Deliveries.payloads, deliveries.record)
                events.on([UserDeleted.self], erasure.userDeleted)
            }
            if let smtp = settings.smtp {
                let newsletters = settings.stories.flatMap { url in app.config.serviceToken.token.map { NewsletterCopies(base: url, token: $0) } }
                if newsletters == nil { app.logger.warn("STORIES_URL or SERVICE_TOKEN is not set: newsletters are not mailed") }
                let sender = MailSender(pool: app.pool, storage: storage, settings: smtp, from: settings.appSenders, bounce: settings.bounce,
                                        newsletters: newsletters, base: settings.mails.base, metrics: app.metrics, logger: app.logger)
                try sender.services(workers: settings.senders).forEach(app.add)
            } else {
                app.logger.warn("SMTP_URL is not set: no mail is sent; deliveries wait until it is")
            }
            if settings.push == nil { app.logger.warn("VAPID_PRIVATE_KEY is not set: no Web Push (its routes answer 404)") }
            let native = settings.native
            app.logger.info(native.apns == nil ? "APNs off: APNS_PRIVATE_KEY is not set" : "APNs on",
                            native.apns.map { ["apps": .string($0.topics.keys.sorted().joined(separator: ",")), "url": .string($0.productionURL)] } ?? [:])
            app.logger.info(native.fcm == nil ? "FCM off: FCM_SERVICE_ACCOUNT is not set" : "FCM on",
                            native.fcm.map { ["project": .string($0.tokens.account.projectId), "url": .string($0.url)] } ?? [:])
            if settings.push != nil || native.apns != nil || native.fcm != nil {
                let rooms = settings.chat.flatMap { url in app.config.serviceToken.token.map { ChatRooms(base: url, token: $0) } }
                if rooms == nil { app.logger.warn("CHAT_URL or SERVICE_TOKEN is not set: chat messages are told without their room") }
                let sender = PushSender(pool: app.pool, storage: storage, keys: settings.push, native: native, rooms: rooms,
                                        timeout: settings.pushTimeout, metrics: app.metrics, logger: app.logger)
                try sender.services(workers: settings.pushSenders).forEach(app.add)
            }
            let pool = app.pool
            app.metrics.addGauges(help: ["notify_backlog_deliveries": "Deliveries due and not yet made.",
                                         "notify_backlog_oldest_seconds": "How long the oldest delivery due has waited."]) {
                guard let backlog = try? pool.withConnection({ try storage.backlog($0) }) else { return [] }
                return [("notify_backlog_deliveries", "", Double(backlog.count)), ("notify_backlog_oldest_seconds", "", backlog.oldest)]
            }
            let handlers = NotifyHandlers(pool: pool, storage: storage,
                                          subscriptions: settings.push.map { Subscriptions(storage: storage, keys: $0, allowed: settings.allowed) },
                                          devices: native.apns == nil && native.fcm == nil ? nil
                                              : Devices(storage: storage, apnsTopics: native.apns?.topics, fcm: native.fcm != nil))
            return makeRoutes(handlers, app.makeTokenVerifier(), services: app.config.serviceToken)
        }
    }
}
