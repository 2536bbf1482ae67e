import Foundation
import Mail
import Models
import Runtime
import Web

/// What each kind of mail says, and the links in it. A mail speaks as the app its request came from (`ClientApp`:
/// its name in the subject and the page, its colour, `?app=` in its links, which the app's universal links match), or
/// as the backend itself when none is named.
struct Mails: Sendable {
    /// The public origin (`PUBLIC_BASE_URL`): verification links go to auth's page there.
    let base: String
    /// The reset-password page (`PASSWORD_RESET_URL`, default auth's at the public origin): the link adds `token`.
    let resetURL: String

    struct Content {
        let subject: String
        let text: String
        let html: String
    }

    func verification(_ e: EmailVerificationRequested) -> Content {
        let app = ClientApp.named(e.app)
        let link = base + "/verify-email?token=" + e.token + Self.appQuery(app)
        return Content(subject: "Confirm your e-mail address" + (app.map { " for " + $0.name } ?? ""),
                       text: "Open this link to confirm that \(e.email) is your address:\n\n\(link)\n\n"
                           + "It works once, for 24 hours. If you did not sign up, ignore this mail.",
                       html: page(app, "Confirm your e-mail address", "Confirm that \(escape(e.email)) is your address:", link, "Confirm my address",
                                  "It works once, for 24 hours. If you did not sign up, ignore this mail."))
    }

    func reset(_ e: PasswordResetRequested) -> Content {
        let app = ClientApp.named(e.app)
        let link = resetURL + (resetURL.contains("?") ? "&" : "?") + "token=" + e.token + Self.appQuery(app)
        return Content(subject: app.map { "Reset your \($0.name) password" } ?? "Reset your password",
                       text: "Someone asked to reset the password of your account (\(e.email)). To choose a new one, open:\n\n\(link)\n\n"
                           + "It works once, for 30 minutes, and signs you out everywhere. If it was not you, ignore this mail: "
                           + "your password stays as it is.",
                       html: page(app, "Reset your password", "Someone asked to reset the password of your account (\(escape(e.email))).", link,
                                  "Choose a new password",
                                  "It works once, for 30 minutes, and signs you out everywhere. If it was not you, ignore this mail: your password stays as it is."))
    }

    /// A receipt: its number, each line, the total with the tax it includes, in the currency's minor units shown as
    /// major ones (two decimals).
    func receipt(_ e: PaymentReceiptIssued) -> Content {
        func money(_ minor: Int) -> String {
            (minor < 0 ? "-" : "") + "\(abs(minor) / 100).\(String(format: "%02d", abs(minor) % 100)) \(e.currency)"
        }
        let rate = "\(e.taxRateBasisPoints / 100)" + (e.taxRateBasisPoints % 100 == 0 ? "" : String(format: ".%02d", e.taxRateBasisPoints % 100))
        let date = String(Timestamp.format(e.issuedAt).prefix(10))
        let rows = e.lines.map { ($0.description, money($0.amountMinor)) } + [("Net", money(e.netMinor)), ("Tax (\(rate) %)", money(e.taxMinor))]
        let text = "Receipt \(e.number), \(date)\n\n" + rows.map { "\($0.0): \($0.1)" }.joined(separator: "\n")
            + "\n\nTotal paid: \(money(e.totalMinor)), tax included.\n"
        let cells = rows.map { "<tr><td>\(escape($0.0))</td><td style=\"text-align:right\">\(escape($0.1))</td></tr>" }.joined()
        let html = """
            <!DOCTYPE html><html><head><meta charset="utf-8"><title>Receipt \(escape(e.number))</title></head>
            <body style="font-family:sans-serif;max-width:32em;margin:2em auto"><h1 style="font-size:1.4em">Receipt \(escape(e.number))</h1>
            <p>\(escape(date))</p><table style="width:100%;border-collapse:collapse">\(cells)
            <tr><th style="text-align:left">Total paid</th><th style="text-align:right">\(escape(money(e.totalMinor)))</th></tr></table>
            <p style="color:#555;font-size:.9em">Tax included.</p></body></html>
            """
        return Content(subject: "Your receipt \(e.number)", text: text, html: html)
    }

    /// `&app=<id>`: the page speaks as the app, and the app's universal link (its association's `?app=` component)
    /// opens it rather than another app of the same origin.
    static func appQuery(_ app: ClientApp?) -> String { app.map { "&app=" + $0.id } ?? "" }

    private func page(_ app: ClientApp?, _ title: String, _ lead: String, _ link: String, _ action: String, _ small: String) -> String {
        let accent = app?.accent ?? ClientApp.neutralAccent
        return """
        <!DOCTYPE html><html><head><meta charset="utf-8"><title>\(escape(title))</title></head>
        <body style="font-family:sans-serif;max-width:32em;margin:2em auto">\(app.map { "<p style=\"color:\(accent);font-weight:bold;margin:0\">\(escape($0.name))</p>" } ?? "")<h1 style="font-size:1.4em">\(escape(title))</h1>
        <p>\(lead)</p><p><a href="\(escape(link))" style="display:inline-block;padding:.6em 1.2em;background:\(accent);color:#fff;text-decoration:none;border-radius:4px">\(escape(action))</a></p>
        <p style="color:#555;font-size:.9em">\(escape(small))</p></body></html>
        """
    }

    private func escape(_ s: String) -> String { HTML.escape(s) }
}

/// Who a mail is from: the app it speaks as (named as the app, from its address in `APP_MAIL_FROM`, else
/// `MAIL_FROM`), or the backend's own sender (`MAIL_FROM`, `MAIL_FROM_NAME`) for a mail of no app.
struct MailSenders: Sendable {
    let own: MailAddress
    let apps: [String: MailAddress]

    /// `APP_MAIL_FROM`: `app=address` pairs, comma-separated (an address of a domain whose SPF and DKIM name the
    /// SMTP server, as `MAIL_FROM`'s).
    init(own: MailAddress, _ environment: Environment) throws {
        var addresses: [String: String] = [:]
        for pair in (environment.optional("APP_MAIL_FROM") ?? "").split(separator: ",") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, ClientApp.named(parts[0]) != nil, (try? MailAddress(parts[1])) != nil else {
                throw ConfigError(variable: "APP_MAIL_FROM", problem: "must be app=address pairs, the apps among "
                                  + ClientApp.all.map(\.id).joined(separator: ", ") + " (got \"\(pair.prefix(80))\")")
            }
            addresses[parts[0]] = parts[1]
        }
        self.own = own
        apps = Dictionary(uniqueKeysWithValues: try ClientApp.all.map { ($0.id, try MailAddress(addresses[$0.id] ?? own.address, name: $0.name)) })
    }

    /// The sender of a mail of `app` (nil, or one no longer in the table: the backend's own).
    func of(_ app: String?) -> MailAddress { app.flatMap { apps[$0] } ?? own }
}
