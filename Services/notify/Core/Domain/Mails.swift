import Foundation
import Models
import Web

/// What each kind of mail says, and the links in it.
struct Mails: Sendable {
    /// The public origin (`PUBLIC_BASE_URL`): verification links go to auth's page there.
    let base: String
    /// The apps' reset-password screen (`PASSWORD_RESET_URL`): the link adds `token`.
    let resetURL: String

    struct Content {
        let subject: String
        let text: String
        let html: String
    }

    func verification(_ e: EmailVerificationRequested) -> Content {
        let link = base + "/v1/auth/email-verification?token=" + e.token
        return Content(subject: "Confirm your e-mail address",
                       text: "Open this link to confirm that \(e.email) is your address:\n\n\(link)\n\n"
                           + "It works once, for 24 hours. If you did not sign up, ignore this mail.",
                       html: page("Confirm your e-mail address", "Confirm that \(escape(e.email)) is your address:", link, "Confirm my address",
                                  "It works once, for 24 hours. If you did not sign up, ignore this mail."))
    }

    func reset(_ e: PasswordResetRequested) -> Content {
        let link = resetURL + (resetURL.contains("?") ? "&" : "?") + "token=" + e.token
        return Content(subject: "Reset your password",
                       text: "Someone asked to reset the password of your account (\(e.email)). To choose a new one, open:\n\n\(link)\n\n"
                           + "It works once, for 30 minutes, and signs you out everywhere. If it was not you, ignore this mail: "
                           + "your password stays as it is.",
                       html: page("Reset your password", "Someone asked to reset the password of your account (\(escape(e.email))).", link,
                                  "Choose a new password",
                                  "It works once, for 30 minutes, and signs you out everywhere. If it was not you, ignore this mail: your password stays as it is."))
    }

    private func page(_ title: String, _ lead: String, _ link: String, _ action: String, _ small: String) -> String {
        """
        <!DOCTYPE html><html><head><meta charset="utf-8"><title>\(escape(title))</title></head>
        <body style="font-family:sans-serif;max-width:32em;margin:2em auto"><h1 style="font-size:1.4em">\(escape(title))</h1>
        <p>\(lead)</p><p><a href="\(escape(link))" style="display:inline-block;padding:.6em 1.2em;background:#2b59c3;color:#fff;text-decoration:none;border-radius:4px">\(escape(action))</a></p>
        <p style="color:#555;font-size:.9em">\(escape(small))</p></body></html>
        """
    }

    private func escape(_ s: String) -> String { HTML.escape(s) }
}
