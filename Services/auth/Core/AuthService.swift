import Models
import ServiceKit

/// The auth service: users, sessions, credentials and signing keys (port 8081, schema `auth`).
public enum AuthService {
    /// The service configured from `environment` (a bad setting throws, naming it); `run()` serves it.
    public static func makeApp(environment: Environment = Environment()) throws -> ServiceApp {
        let google = try GoogleSignIn.Settings(environment).map { GoogleSignIn(settings: $0, keys: .init(url: $0.jwksURL)) }
        let addressFailures = try environment.int("LOGIN_ADDRESS_MAX_FAILURES", default: 100, range: 1...1_000_000)
        return try ServiceApp(service: "auth", defaultPort: 8081, environment: environment, migrations: migrations,
                       topics: [UserRegistered.type, UserUpdated.type, SessionRevoked.type]) { app in
            let pool = app.pool
            let key = try pool.withTransaction { try AuthStorage().signingKey($0) }
            let keys = SigningKeys(kid: key.kid, key: key.key)
            let handlers = AuthHandlers(pool: pool, outbox: app.outbox, idempotency: app.idempotency, keys: keys,
                                        login: LoginThrottle(addressFailures: addressFailures, trustedProxies: app.config.trustedProxies))
            app.add(Job.every(3600, "delete-old-login-failures", logger: app.logger) {
                try pool.withConnection { try AuthStorage().deleteOldFailures($0) }
            })
            if let google, !google.keys.refresh() { app.logger.warn("Google's key set could not be fetched yet (GOOGLE_JWKS_URL)") }
            return makeRoutes(handlers, SessionAuthenticator(keys: keys, pool: pool), google: google, services: app.config.serviceToken)
        }
    }
}
