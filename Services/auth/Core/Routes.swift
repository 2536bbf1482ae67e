import Features
import HTTP
import Identity
import Web

/// The auth API: the table of routes, nothing else.
func makeRoutes(_ h: AuthHandlers, _ auth: SessionAuthenticator, google: GoogleSignIn?, apple: AppleSignIn?, moderators: SharedSecret,
                services: SharedSecret, clients: ClientIds) -> Router {
    var r = Router()
    r.add("POST", "/v1/auth/signup", summary: "Create an account and a session",
          body: SignupBody.self, response: (201, SessionView.shape), noStore(h.signup))
    r.add("POST", "/v1/auth/login", summary: "Open a session with username or email and password",
          body: LoginBody.self, response: (200, SessionView.shape), noStore(h.login))
    r.add("POST", "/v1/auth/refresh", summary: "Rotate a refresh token for a new token pair",
          body: RefreshBody.self, response: (200, SessionView.shape), noStore(h.refresh))
    // Without GOOGLE_CLIENT_IDS, sign-in with Google does not exist (404, and absent from /openapi.json).
    if let google {
        r.add("POST", "/v1/auth/google", summary: "Sign in with a Google ID token (creates the account the first time)",
              body: GoogleBody.self, response: (200, SessionView.shape), noStore { try h.google($0, $1, google) })
    }
    // Without APPLE_CLIENT_IDS, sign in with Apple does not exist (404, and absent from /openapi.json).
    if let apple {
        r.add("POST", "/v1/auth/apple", summary: "Sign in with an Apple identity token, its raw nonce and authorization code (creates the account the first time)",
              body: AppleBody.self, response: (200, SessionView.shape), noStore { try h.apple($0, $1, apple) })
        r.alsoRefuses("POST", "/v1/auth/apple", 503, "Apple's token endpoint did not answer the code exchange (Retry-After)")
    }
    r.add("POST", "/v1/auth/password-reset", summary: "Forgot password: a reset mail to the account with this address, if there is one (202 either way)",
          body: PasswordResetBody.self, response: (202, nil), h.requestPasswordReset)
    r.alsoRefuses("POST", "/v1/auth/password-reset", 429, "Too many requests from this client within the hour (Retry-After)")
    r.add("POST", "/v1/auth/password-reset/confirm", summary: "Set a new password with the token the reset mail carried; every session ends",
          body: NewPasswordBody.self, response: (204, nil), h.resetPassword)
    r.add("POST", "/v1/auth/email-verification", summary: "Confirm my address with the token the mail carried",
          body: EmailTokenBody.self, response: (204, nil), h.verifyEmail)
    r.add("GET", "/v1/auth/email-verification", summary: "The verification mail's link: confirms the address, answers a page",
          response: (200, nil), h.verifyEmailLink)
    r.query("GET", "/v1/auth/email-verification", [QueryParameter("token", .string(max: 64), "The token the mail carried")])
    r.alsoAnswers("GET", "/v1/auth/email-verification", 200, contentType: "text/html; charset=utf-8")
    // The pages the mails' links open without the app (with it, the same URLs open the app: the gateway's
    // association files): HTML, their refusals too.
    r.add("GET", "/reset-password", summary: "The reset mail's link: a page with the form for a new password", response: (200, nil), h.resetPasswordPage)
    r.add("POST", "/reset-password", summary: "The reset page's form (application/x-www-form-urlencoded: token, password, confirm, app): sets the password, ends every session",
          bodyLimit: 16 << 10, response: (200, nil), credentials: { _ in }) { request, _ in try h.resetPasswordByForm(request) }
    r.add("GET", "/verify-email", summary: "The verification mail's link: confirms the address, answers a page", response: (200, nil), h.verifyEmailPage)
    for (method, path) in [("GET", "/reset-password"), ("POST", "/reset-password"), ("GET", "/verify-email")] {
        if method == "GET" {
            r.query(method, path, [QueryParameter("token", .string(max: 64), "The token the mail carried"),
                                   QueryParameter("app", .string(max: 32), "The app the mail came from: the page speaks as it")])
        }
        r.alsoAnswers(method, path, 200, contentType: "text/html; charset=utf-8")
        r.alsoAnswers(method, path, 400, contentType: "text/html; charset=utf-8", description: "A link that no longer works, or a form that does not fit: a page saying so")
        r.alsoAnswers(method, path, 400, contentType: "application/json", schema: OpenAPI.errorSchema)
    }
    r.alsoAnswers("POST", "/reset-password", 415, contentType: "text/html; charset=utf-8", description: "Not a form: a page saying so")
    r.add("POST", "/v1/auth/logout", summary: "Revoke the current session", response: (204, nil), auth: auth, h.logout)
    r.add("POST", "/v1/auth/stream-tickets", summary: "A single-use ticket, valid for a minute, that opens one event stream (?ticket=)",
          response: (201, StreamTicketView.shape), auth: auth, h.streamTicket)
    r.add("GET", "/v1/auth/jwks", summary: "The public keys that verify access tokens",
          response: (200, JWKSet.shape), h.jwks)
    r.add("GET", "/v1/users/me", summary: "The current user", response: (200, UserView.shape),
          auth: auth.leavingTheSessionToTheHandler, h.me)
    r.add("PATCH", "/v1/users/me", summary: "Change the current user's profile", body: UpdateMeBody.self,
          response: (200, UserView.shape), auth: auth, h.updateMe)
    r.add("POST", "/v1/users/me/email-verification", summary: "Another mail proving my address (409 when it is proven)",
          response: (202, nil), auth: auth, h.resendVerification)
    r.add("GET", "/v1/usernames/{username}", summary: "Someone by their exact username (to start a direct chat, name a recipient)",
          response: (200, PersonView.shape), auth: auth, h.userByUsername)
    r.alsoRefuses("GET", "/v1/usernames/{username}", 429, "Too many names nobody has, asked within 15 minutes (Retry-After)")
    r.add("DELETE", "/v1/users/me", summary: "Delete my account (re-authenticated): erased everywhere after a grace period; signing in again keeps it",
          body: DeleteAccountBody.self, response: (202, DeletionView.shape), auth: auth, h.deleteMe)
    r.add("GET", "/v1/users/me/export", summary: "Everything the backend holds of me, as one JSON archive", response: (200, nil),
          auth: auth, h.export)
    r.add("GET", "/v1/users/me/blocks", summary: "The people I blocked", response: (200, ItemList<PersonView>.shape), auth: auth, h.blocks)
    r.add("PUT", "/v1/users/me/blocks/{userId}", summary: "Block someone: no direct room with me, their messages and comments hidden from me, no joining what I run",
          response: (204, nil), auth: auth, h.block)
    r.add("DELETE", "/v1/users/me/blocks/{userId}", summary: "Lift a block", response: (204, nil), auth: auth, h.unblock)
    r.add("POST", "/v1/users/{id}/reports", summary: "Report a person to the moderators", body: ReportBody.self,
          response: (201, ReportView.shape), auth: auth, h.reportPerson)
    // Without OPERATOR_TOKEN (the moderators' credential here) the queue of reports does not exist (404).
    r.addModeration("auth", what: "person (the account is suspended)", moderators: moderators, pool: h.pool, reports: Reports(schema: "auth"),
                    takeDown: h.suspend)
    r.add("GET", "/v1/users/me/sessions", summary: "Where I am signed in", response: (200, ItemList<DeviceSessionView>.shape),
          auth: auth, h.sessions)
    r.add("DELETE", "/v1/users/me/sessions", summary: "Sign out every device but this one", response: (204, nil), auth: auth, h.signOutOthers)
    r.add("DELETE", "/v1/users/me/sessions/{id}", summary: "Sign out one device", response: (204, nil), auth: auth, h.signOut)
    r.add("POST", "/v1/users/me/password", summary: "Change the password; ends every other session",
          body: ChangePasswordBody.self, response: (204, nil), auth: auth, h.changePassword)
    // Without SERVICE_TOKEN the list does not exist (404): other services then rely on session.revoked alone.
    if services.isEnabled {
        r.add("GET", "/v1/internal/revoked-sessions", summary: "Services: the sessions revoked within the access-token lifetime",
              response: (200, RevokedSessionList.shape), trusted: services, h.revokedSessions)
        r.query("GET", "/v1/internal/revoked-sessions", [QueryParameter("since", .dateTime,
                "Only the sessions revoked at or after this time (what is new since the last read); the whole list without it")])
    }
    // The routes whose mails speak as the app the request came from.
    for (method, path) in [("POST", "/v1/auth/signup"), ("POST", "/v1/auth/password-reset"), ("PATCH", "/v1/users/me"),
                           ("POST", "/v1/users/me/email-verification")] {
        r.header(method, path, [clients.header])
    }
    r.idempotent("POST", ["/v1/auth/signup"])
    return r
}

/// An answer that carries tokens is kept by no cache, shared or private (RFC 9111 `no-store`).
private func noStore<Body>(_ handler: @escaping @Sendable (Request, Body) throws -> Response) -> @Sendable (Request, Body) throws -> Response {
    { request, body in
        var response = try handler(request, body)
        response.headers.append(("Cache-Control", "no-store"))
        return response
    }
}
