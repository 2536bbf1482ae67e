import Crypto
import Foundation
import HTTP
import Models
import Web

/// The pages the mails' links open where the app is not installed (a computer, a phone without it): where it is, the
/// same URLs open the app instead (universal links and App Links: the gateway's association files name these paths),
/// which sends the token to the JSON routes. No script at all, one inline style allowed by its hash, forms that post
/// only here, never framed, never cached, no referrer (the URL holds a token). A link that no longer works is a page
/// saying so (400), as is a form that does not fit; what the kit refuses before the handler stays JSON.
extension AuthHandlers {
    /// `GET /reset-password?token=&app=`: the form for a new password. Opening it changes nothing (mail scanners
    /// open links): the token is used when the form is posted.
    func resetPasswordPage(_ request: Request) throws -> Response {
        let app = ClientApp.named(request.query["app"])
        let token = request.query["token"] ?? ""
        guard try pool.withConnection({ try proofs.usable($0, token: token, purpose: "reset") }) else { return Page.noLongerWorks(app) }
        return Page.render(app, "Choose a new password", Page.resetForm(token: token, app: app, problem: nil))
    }

    /// `POST /reset-password`: the page's form (`token`, `password`, `confirm`, `app`): the new password is set and
    /// every session of the account ends, as `POST /v1/auth/password-reset/confirm` does.
    func resetPasswordByForm(_ request: Request) throws -> Response {
        let form: Form
        do {
            form = try Form(request, fields: ["token": 64, "password": Page.passwordBytes, "confirm": Page.passwordBytes, "app": 32])
        } catch let error as HTTPError {
            return Page.render(nil, "This form could not be read", "<p>\(HTML.escape(error.message)) Open the link in the mail again.</p>",
                               status: error.status)
        }
        let app = ClientApp.named(form["app"])
        let token = form["token"] ?? ""
        // A token that does not work costs no password hashing (the form's page checked it too, but may be old).
        guard try pool.withConnection({ try proofs.usable($0, token: token, purpose: "reset") }) else { return Page.noLongerWorks(app) }
        let password = form["password"] ?? "", confirm = form["confirm"] ?? ""
        var problem: String?
        if password.count < Page.passwordCharacters { problem = "The password must be at least \(Page.passwordCharacters) characters." }
        if problem == nil && password != confirm { problem = "The two passwords are not the same." }
        if let problem {
            return Page.render(app, "Choose a new password", Page.resetForm(token: token, app: app, problem: problem), status: 400)
        }
        guard try setPassword(token: token, to: password) else { return Page.noLongerWorks(app) }
        return Page.render(app, "Your password is changed",
                           "<p>Sign in with your new password\(app.map { " in " + HTML.escape($0.name) } ?? ""). "
                           + "Every device that was signed in to your account is signed out.</p>")
    }

    /// `GET /verify-email?token=&app=`: the verification mail's link, opened in a browser: the address is proven and
    /// the page says so. Opening proves it, as the link always did: whoever can open a link mailed to an address
    /// (the mailbox's own scanner included) is that address's, which is all the proof says.
    func verifyEmailPage(_ request: Request) throws -> Response {
        let app = ClientApp.named(request.query["app"])
        let token = request.query["token"] ?? ""
        guard try pool.withTransaction({ try proofs.verify($0, token: token) }) != nil else { return Page.noLongerWorks(app) }
        return Page.render(app, "Address confirmed", "<p>Thank you: your e-mail address is confirmed"
                           + (app.map { ". Go back to \(HTML.escape($0.name)) to carry on." } ?? ". You can close this page."))
    }
}

/// How the pages look and what guards them.
enum Page {
    /// A password as `Check.passwordSchema` takes it: at least this many characters, at most that many bytes.
    static let passwordCharacters = 10
    static let passwordBytes = 1024

    static func noLongerWorks(_ app: ClientApp?) -> Response {
        render(app, "This link no longer works", "<p>\(AuthHandlers.badLink)</p>", status: 400)
    }

    static func resetForm(token: String, app: ClientApp?, problem: String?) -> String {
        (problem.map { "<p class=\"problem\" role=\"alert\">\(HTML.escape($0))</p>" } ?? "")
            + "<form method=\"post\" action=\"/reset-password\">"
            + "<input type=\"hidden\" name=\"token\" value=\"\(HTML.escape(token))\">"
            + (app.map { "<input type=\"hidden\" name=\"app\" value=\"\(HTML.escape($0.id))\">" } ?? "")
            + "<label for=\"password\">New password (at least \(passwordCharacters) characters)</label>"
            + "<input id=\"password\" name=\"password\" type=\"password\" autocomplete=\"new-password\" minlength=\"\(passwordCharacters)\" required>"
            + "<label for=\"confirm\">The same password again</label>"
            + "<input id=\"confirm\" name=\"confirm\" type=\"password\" autocomplete=\"new-password\" minlength=\"\(passwordCharacters)\" required>"
            + "<button type=\"submit\">Set the new password</button></form>"
    }

    /// The page: `body` is HTML, everything in it escaped by the caller; it speaks as `app` (its name, its colour).
    static func render(_ app: ClientApp?, _ title: String, _ body: String, status: Int = 200) -> Response {
        let style = Self.style(accent: app?.accent ?? ClientApp.neutralAccent)
        let name = HTML.escape(app?.name ?? "Your account")
        let html = "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            + "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><meta name=\"referrer\" content=\"no-referrer\">"
            + "<title>\(HTML.escape(title)) · \(name)</title><style>\(style)</style></head>"
            + "<body><main><p class=\"app\">\(name)</p><h1>\(HTML.escape(title))</h1>\(body)</main></body></html>"
        var response = Response.text(html, status: status, contentType: "text/html; charset=utf-8")
        let hash = Data(sha256(Array(style.utf8))).base64EncodedString()
        response.headers += [
            ("Content-Security-Policy", "default-src 'none'; style-src 'sha256-\(hash)'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
            ("X-Frame-Options", "DENY"), ("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "no-referrer"), ("Cache-Control", "no-store"),
        ]
        return response
    }

    /// The one style sheet, in the app's colour (a `#rrggbb` of the table, never from a request).
    static func style(accent: String) -> String {
        "body{margin:0;font-family:system-ui,-apple-system,sans-serif;background:#f4f4f5;color:#1f2933}"
            + "main{max-width:26em;margin:3em auto;padding:1.5em 1.75em;background:#fff;border-radius:10px;border-top:4px solid \(accent)}"
            + ".app{margin:0;color:\(accent);font-weight:600}h1{font-size:1.4em;margin:.3em 0 .8em}"
            + "label{display:block;margin:1em 0 .3em}input{width:100%;box-sizing:border-box;padding:.6em;font-size:1em;border:1px solid #c4c9d0;border-radius:6px}"
            + "button{margin-top:1.4em;padding:.7em 1.4em;font-size:1em;color:#fff;background:\(accent);border:0;border-radius:6px}"
            + ".problem{color:#b42318;font-weight:600}"
    }
}
