import Events
import Features
import Foundation
import Mail
import Models
import Postgres
import Runtime

/// The delivery rules. Each (event, person, channel) is recorded once, in the transaction that marks the event
/// processed, so a replayed or repeated event sends nothing twice; the senders send what is due: at once in normal
/// operation, again with backoff after a temporary failure (up to `maxAttempts`), never after a permanent one or once
/// what the mail links to has expired.
struct Deliveries: Sendable {
    let storage: NotifyStorage
    let mails: Mails

    static let maxAttempts = 8

    /// An event that asks for a mail, recorded for sending: nothing for an account erased since, a repeat, or a link
    /// that expired already (a notify started long after, reading the topic from its start, mails no stale links).
    func record(_ event: ReceivedEvent, _ c: Connection) throws {
        let (user, address, kind, expires, content): (String, String, String, String, Mails.Content)
        switch event.type {
        case EmailVerificationRequested.type:
            let e = try event.decode(EmailVerificationRequested.self)
            (user, address, kind, expires, content) = (e.userId, e.email, "email_verification", e.expiresAt, mails.verification(e))
        case PasswordResetRequested.type:
            let e = try event.decode(PasswordResetRequested.self)
            (user, address, kind, expires, content) = (e.userId, e.email, "password_reset", e.expiresAt, mails.reset(e))
        default:
            return
        }
        guard let id = UUID(uuidString: user), let expiresAt = Timestamp.parse(expires), expiresAt > Date(),
              try !Erasure.isErased(id, schema: "notify", on: c) else { return }
        _ = try storage.record(c, id: UUID.v7(), eventId: event.id, user: id, channel: "email", kind: kind, address: address,
                               subject: content.subject, text: content.text, html: content.html, expiresAt: expiresAt)
    }

    /// When to try again after `attempts` tries: 30 s, then 1, 2, 4 … minutes, at most an hour; nil: give up.
    static func retryDelay(after attempts: Int) -> TimeInterval? {
        attempts >= maxAttempts ? nil : min(3600, 30 * pow(2, Double(max(0, attempts - 1))))
    }
}

/// Sends the mail that is due: `workers` loops side by side, each with a connection of its own, so a slow exchange
/// holds up only its own loop. A delivery taken is leased for the exchange's bound: after a kill, only the ones in
/// flight are sent again (with the same Message-ID, which mail clients fold into one).
struct MailSender: Sendable {
    let pool: Pool
    let storage: NotifyStorage
    let settings: SMTPSettings
    let from: MailAddress
    let bounce: String
    let metrics: Metrics
    let logger: Logger

    func services(workers: Int) throws -> [Job] {
        try (0..<workers).map { i in
            let client = try SMTPClient(settings)
            return Job("mail-sender-\(i)") { cancellation in
                while cancellation.sleep(0.5) {
                    do {
                        while !cancellation.isCancelled, try round(client) > 0 {}
                    } catch {
                        logger.warn("the mail sender cannot reach the database; retrying", ["error": .string("\(error)")])
                    }
                }
            }
        }
    }

    /// Sends the next due delivery; how many it took (0 or 1). One at a time: a lease covers one exchange, so a slow
    /// server cannot outlast the lease of a delivery still waiting in a batch (another loop would send it again).
    func round(_ client: SMTPClient) throws -> Int {
        let due = try pool.withTransaction { try storage.claimDue($0, limit: 1, lease: Double(settings.timeout + 30)) }
        for delivery in due { try send(delivery, client) }
        return due.count
    }

    private func send(_ d: DeliveryRecord, _ client: SMTPClient) throws {
        var outcome = "sent"
        do {
            guard (d.expiresAt ?? .distantFuture) > Date() else { throw MailError.permanent("its link expired") }
            guard let text = d.bodyText else { throw MailError.permanent("nothing left to send") }
            let message = MailMessage(from: from, envelopeFrom: bounce, to: try MailAddress(d.address), subject: d.subject, text: text,
                                      html: d.bodyHTML, messageId: "<\(d.id.lowercased)@\(from.address.split(separator: "@").last ?? "localhost")>")
            try client.send(message)
            try pool.withConnection { try storage.markSent($0, d.id) }
        } catch let error as MailError {
            var retry: TimeInterval?
            if case .temporary = error { retry = Deliveries.retryDelay(after: d.attempts) }
            outcome = retry == nil ? "failed" : "retry"
            try pool.withConnection { try storage.markFailed($0, d.id, error: "\(error)", retryIn: retry) }
            logger.warn(retry == nil ? "a mail was given up" : "a mail will be tried again",
                        ["delivery": .string(d.id.lowercased), "kind": .string(d.kind), "attempts": .int(d.attempts), "error": .string("\(error)")])
        }
        metrics.increment("notify_deliveries_total", labels: "channel=\"email\",outcome=\"\(outcome)\"",
                          help: "Deliveries tried, by channel and outcome (sent, retry, failed).")
    }
}
