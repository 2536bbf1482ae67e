import Features
import Foundation
import Mail
import Models
import Runtime
import ServiceKit
import Web

/// The notify service: turns events into mail, once per event and person, with a log of what was sent to whom
/// (port 8086, schema `notify`). Web Push and the other kinds of notification come next (issue 23).
public enum NotifyService {
    /// Notify's own settings, read and checked before anything starts.
    struct Settings {
        /// `SMTP_URL` (`smtp://host:port`, STARTTLS; `smtps://host:port`), `SMTP_USERNAME`, `SMTP_PASSWORD`,
        /// `SMTP_REQUIRE_TLS` (true; false only for a mail sink on the same host), `SMTP_CA_FILE`,
        /// `SMTP_TIMEOUT_SECONDS` (30). Unset: nothing is sent (deliveries wait until it is set).
        let smtp: SMTPSettings?
        /// `MAIL_FROM` and `MAIL_FROM_NAME`: who the mail is from.
        let from: MailAddress
        /// `MAIL_BOUNCE_ADDRESS` (default `MAIL_FROM`): where bounces go, an address nobody answers from.
        let bounce: String
        /// `MAIL_SENDERS` (4): loops sending side by side, each with its own connection.
        let senders: Int
        let mails: Mails

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
            bounce = environment.string("MAIL_BOUNCE_ADDRESS", default: from.address)
            guard (try? MailAddress(bounce)) != nil else { throw ConfigError(variable: "MAIL_BOUNCE_ADDRESS", problem: "must be an e-mail address") }
            senders = try environment.int("MAIL_SENDERS", default: 4, range: 1...64)
            let port = try environment.int("PORT", default: 8086, range: 0...65535)
            let base = environment.string("PUBLIC_BASE_URL", default: "http://127.0.0.1:\(port)")
            guard let url = URL(string: base), ["http", "https"].contains(url.scheme ?? ""), url.host != nil, url.query == nil else {
                throw ConfigError(variable: "PUBLIC_BASE_URL", problem: "must be an http(s) URL such as https://api.example.com")
            }
            let origin = base.hasSuffix("/") ? String(base.dropLast()) : base
            let reset = environment.string("PASSWORD_RESET_URL", default: origin + "/reset-password")
            guard let resetURL = URL(string: reset), ["http", "https"].contains(resetURL.scheme ?? ""), resetURL.host != nil else {
                throw ConfigError(variable: "PASSWORD_RESET_URL", problem: "must be an http(s) URL: the apps' reset-password page")
            }
            mails = Mails(base: origin, resetURL: reset)
        }
    }

    /// The service configured from `environment` (a bad setting throws, naming it); `run()` serves it.
    public static func makeApp(environment: Environment = Environment()) throws -> ServiceApp {
        let settings = try Settings(environment)
        return try ServiceApp(service: "notify", defaultPort: 8086, environment: environment, migrations: migrations) { app in
            let storage = NotifyStorage()
            let deliveries = Deliveries(storage: storage, mails: settings.mails)
            let leaving = Leaving(storage: storage)
            app.consume("mail", topics: [EmailVerificationRequested.type, PasswordResetRequested.type, UserDeleted.type]) { event, c in
                if event.type == UserDeleted.type { try leaving.userDeleted(event, c) } else { try deliveries.record(event, c) }
            }
            if let smtp = settings.smtp {
                let sender = MailSender(pool: app.pool, storage: storage, settings: smtp, from: settings.from, bounce: settings.bounce,
                                        metrics: app.metrics, logger: app.logger)
                try sender.services(workers: settings.senders).forEach(app.add)
            } else {
                app.logger.warn("SMTP_URL is not set: no mail is sent; deliveries wait until it is")
            }
            let pool = app.pool
            app.metrics.addGauges {
                guard let backlog = try? pool.withConnection({ try storage.backlog($0) }) else { return [] }
                return [("notify_backlog_deliveries", "", Double(backlog.count)), ("notify_backlog_oldest_seconds", "", backlog.oldest)]
            }
            let handlers = NotifyHandlers(pool: pool, storage: storage)
            return makeRoutes(handlers, app.makeTokenVerifier(), services: app.config.serviceToken)
        }
    }
}
