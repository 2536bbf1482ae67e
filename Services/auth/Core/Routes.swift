import Features
import HTTP
import Identity
import Web

/// The auth API: the table of routes, nothing else.
func makeRoutes(_ h: AuthHandlers, _ auth: SessionAuthenticator, google: GoogleSignIn?, apple: AppleSignIn?, moderators: SharedSecret,
                services: SharedSecret, clients: ClientIds) -> Router {
    var r = Router()
    // The routes whose mails speak as the app the request came from take its X-Client-Id.
    let app = [clients.header]
    r.group("/v1/auth", .everyone) { open in
        open.add("POST", "/signup", "Create an account and a session", body: SignupBody.self, answers: (201, SessionView.shape),
                 headers: app, idempotent: true, noStore(h.signup))
        open.add("POST", "/login", "Open a session with username or email and password", body: LoginBody.self,
                 answers: (200, SessionView.shape), noStore(h.login))
        open.add("POST", "/refresh", "Rotate a refresh token for a new token pair", body: RefreshBody.self,
                 answers: (200, SessionView.shape), noStore(h.refresh))
        // Without GOOGLE_CLIENT_IDS, sign-in with Google does not exist (404, and absent from /openapi.json).
        if let google {
            open.add("POST", "/google", "Sign in with a Google ID token (creates the account the first time)", body: GoogleBody.self,
                     answers: (200, SessionView.shape), noStore { try h.google($0, $1, google) })
        }
        // Without APPLE_CLIENT_IDS, sign in with Apple does not exist (404, and absent from /openapi.json).
        if let apple {
            open.add("POST", "/apple", "Sign in with an Apple identity token, its raw nonce and authorization code (creates the account the first time)",
                     body: AppleBody.self, answers: (200, SessionView.shape),
                     also: [.refusal(503, "Apple's token endpoint did not answer the code exchange (Retry-After)")],
                     noStore { try h.apple($0, $1, apple) })
        }
        open.add("POST", "/password-reset", "Forgot password: a reset mail to the account with this address, if there is one (202 either way)",
                 body: PasswordResetBody.self, answers: (202, nil), headers: app,
                 also: [.refusal(429, "Too many requests from this client within the hour (Retry-After)")], h.requestPasswordReset)
        open.add("POST", "/password-reset/confirm", "Set a new password with the token the reset mail carried; every session ends",
                 body: NewPasswordBody.self, answers: (204, nil), h.resetPassword)
        open.add("POST", "/email-verification", "Confirm my address with the token the mail carried", body: EmailTokenBody.self,
                 answers: (204, nil), h.verifyEmail)
        open.add("GET", "/email-verification", "The verification mail's link: confirms the address, answers a page", answers: (200, nil),
                 query: [QueryParameter("token", .string(max: 64), "The token the mail carried")],
                 also: [.answer(200, contentType: "text/html; charset=utf-8")], h.verifyEmailLink)
        open.add("GET", "/jwks", "The public keys that verify access tokens", answers: (200, JWKSet.shape), h.jwks)
    }
    // The pages the mails' links open without the app (with it, the same URLs open the app: the gateway's
    // association files): HTML, their refusals too.
    r.group(.everyone) { pages in
        let html = "text/html; charset=utf-8"
        let link = [QueryParameter("token", .string(max: 64), "The token the mail carried"),
                    QueryParameter("app", .string(max: 32), "The app the mail came from: the page speaks as it")]
        let answers: [RouteGroup<Void>.Also] = [
            .answer(200, contentType: html),
            .answer(400, contentType: html, description: "A link that no longer works, or a form that does not fit: a page saying so"),
            .answer(400, schemaText: OpenAPI.errorSchema)]
        pages.add("GET", "/reset-password", "The reset mail's link: a page with the form for a new password", answers: (200, nil),
                  query: link, also: answers) { try h.resetPasswordPage($0.request) }
        pages.add("POST", "/reset-password", "The reset page's form (application/x-www-form-urlencoded: token, password, confirm, app): sets the password, ends every session",
                  answers: (200, nil), also: answers + [.answer(415, contentType: html, description: "Not a form: a page saying so")],
                  bodyLimit: 16 << 10) { try h.resetPasswordByForm($0.request) }
        pages.add("GET", "/verify-email", "The verification mail's link: confirms the address, answers a page", answers: (200, nil),
                  query: link, also: answers) { try h.verifyEmailPage($0.request) }
    }
    r.group("/v1/auth", .user(auth)) { session in
        session.add("POST", "/logout", "Revoke the current session", answers: (204, nil), h.logout)
        session.add("POST", "/stream-tickets", "A single-use ticket, valid for a minute, that opens one event stream (?ticket=)",
                    answers: (201, StreamTicketView.shape), h.streamTicket)
    }
    r.group("/v1/users/me", .user(auth.leavingTheSessionToTheHandler)) { me in
        me.add("GET", "", "The current user", answers: (200, UserView.shape), h.me)
    }
    r.group("/v1/users/me", .user(auth)) { me in
        me.add("PATCH", "", "Change the current user's profile", body: UpdateMeBody.self, answers: (200, UserView.shape),
               headers: app, h.updateMe)
        me.add("POST", "/email-verification", "Another mail proving my address (409 when it is proven)", answers: (202, nil),
               headers: app, h.resendVerification)
        me.add("DELETE", "", "Delete my account (re-authenticated): erased everywhere after a grace period; signing in again keeps it",
               body: DeleteAccountBody.self, answers: (202, DeletionView.shape), h.deleteMe)
        me.add("GET", "/export", "Everything the backend holds of me, as one JSON archive", answers: (200, nil), h.export)
        me.add("GET", "/blocks", "The people I blocked", answers: (200, ItemList<PersonView>.shape), h.blocks)
        me.add("PUT", "/blocks/{userId}", "Block someone: no direct room with me, their messages and comments hidden from me, no joining what I run",
               answers: (204, nil), h.block)
        me.add("DELETE", "/blocks/{userId}", "Lift a block", answers: (204, nil), h.unblock)
        me.add("GET", "/sessions", "Where I am signed in", answers: (200, ItemList<DeviceSessionView>.shape), h.sessions)
        me.add("DELETE", "/sessions", "Sign out every device but this one", answers: (204, nil), h.signOutOthers)
        me.add("DELETE", "/sessions/{id}", "Sign out one device", answers: (204, nil), h.signOut)
        me.add("POST", "/password", "Change the password; ends every other session", body: ChangePasswordBody.self,
               answers: (204, nil), h.changePassword)
    }
    r.group("/v1", .user(auth)) { people in
        people.add("GET", "/usernames/{username}", "Someone by their exact username (to start a direct chat, name a recipient)",
                   answers: (200, PersonView.shape),
                   also: [.refusal(429, "Too many names nobody has, asked within 15 minutes (Retry-After)")], h.userByUsername)
        people.add("POST", "/users/{id}/reports", "Report a person to the moderators", body: ReportBody.self,
                   answers: (201, ReportView.shape), h.reportPerson)
    }
    // Without OPERATOR_TOKEN (the moderators' credential here) the queue of reports does not exist (404).
    r.addModeration("auth", what: "person (the account is suspended)", moderators: moderators, pool: h.pool, reports: Reports(schema: "auth"),
                    takeDown: h.suspend)
    // Without SERVICE_TOKEN the list does not exist (404): other services then rely on session.revoked alone.
    if services.isEnabled {
        r.group("/v1/internal", .trusted(services)) { trusted in
            trusted.add("GET", "/revoked-sessions", "Services: the sessions revoked within the access-token lifetime",
                        answers: (200, RevokedSessionList.shape),
                        query: [QueryParameter("since", .dateTime,
                                               "Only the sessions revoked at or after this time (what is new since the last read); the whole list without it")],
                        h.revokedSessions)
        }
    }
    return r
}

/// An answer that carries tokens is kept by no cache, shared or private (RFC 9111 `no-store`).
private func noStore<Body>(_ handler: @escaping @Sendable (Context<Void>, Body) throws -> Response)
    -> @Sendable (Context<Void>, Body) throws -> Response {
    { context, body in
        var response = try handler(context, body)
        response.headers.append(("Cache-Control", "no-store"))
        return response
    }
}
