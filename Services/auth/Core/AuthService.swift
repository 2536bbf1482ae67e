import Crypto
import Features
import Models
import Runtime
import ServiceKit
import Web

/// The auth service: users, sessions, credentials and signing keys (port 8081, schema `auth`).
public enum AuthService {
    /// The service configured from `environment` (a bad setting throws, naming it); `run()` serves it.
    public static func makeApp(environment: Environment = Environment()) throws -> ServiceApp {
        let google = try GoogleSignIn.Settings(environment).map { GoogleSignIn(settings: $0, keys: .init(url: $0.jwksURL)) }
        let box = try sealingKey(environment)
        let appleSettings = try AppleSignIn.Settings(environment)
        let addressFailures = try environment.int("LOGIN_ADDRESS_MAX_FAILURES", default: 100, range: 1...1_000_000)
        let urls = try MediaURLs(environment, defaultPort: 8081)
        let graceHours = try environment.int("ACCOUNT_DELETION_GRACE_HOURS", default: 168, range: 0...2160)
        let moderators = try SharedSecret.operatorToken(environment)  // OPERATOR_TOKEN: the moderators' credential
        let exports = try Exports(environment, token: try SharedSecret.serviceToken(environment).token)
        let avatars = try Avatars(environment, token: try SharedSecret.serviceToken(environment).token)
        let clients = try ClientIds(environment)  // CLIENT_IDS: the apps' builds whose X-Client-Id is taken
        let rotate = Command("rotate-keys", usage: "rotate-keys [--activate-in SECONDS]") { app, arguments in
            var seconds = 300
            if !arguments.isEmpty {
                guard arguments.count == 2, arguments[0] == "--activate-in", let n = Int(arguments[1]), (0...86_400).contains(n) else {
                    app.logger.error("usage: auth rotate-keys [--activate-in SECONDS (0 to 86400; default 300)]")
                    return 64
                }
                seconds = n
            }
            let kid = try app.pool.withTransaction { try AuthStorage().addSigningKey($0, activatesIn: seconds, sealWith: box) }
            app.logger.info("added a signing key: published now, signing from its activation; the current one stays trusted until its tokens expire",
                            ["kid": .string(kid), "activatesInSeconds": .int(seconds)])
            return 0
        }
        return try ServiceApp(service: "auth", defaultPort: 8081, environment: environment, migrations: migrations,
                       commands: [rotate]) { app in
            let pool = app.pool
            let storage = AuthStorage()
            let stored = try pool.withTransaction { c in
                try storage.ensureSigningKey(c, sealWith: box)
                if let box, try storage.sealPlainSeeds(c, with: box) > 0 { app.logger.info("sealed the signing key seeds stored in the clear") }
                return try storage.signingKeys(c, openWith: box)
            }
            if !avatars.isEnabled { app.logger.warn("STORIES_URL or SERVICE_TOKEN is not set: no avatar can be set") }
            if box == nil { app.logger.warn("SIGNING_KEY_ENCRYPTION_KEY is not set: the signing key seeds are stored in the clear") }
            let keys = try SigningKeys(stored)
            let apple = appleSettings.map { AppleSignIn(settings: $0, keys: .init(url: $0.jwksURL), box: box, logger: app.logger) }
            app.add(Job.every(5, "signing-keys", logger: app.logger) {
                try pool.withConnection { c in
                    try storage.deleteRetiredKeys(c)
                    keys.update(try storage.signingKeys(c, openWith: box))
                }
            })
            let handlers = AuthHandlers(pool: pool, outbox: app.outbox, idempotency: app.idempotency, keys: keys,
                                        login: LoginThrottle(addressFailures: addressFailures, trustedProxies: app.config.trustedProxies),
                                        urls: urls, google: google, apple: apple, deletionGrace: Double(graceHours) * 3600,
                                        exports: exports, avatars: avatars, current: CurrentUsers())
            app.add(handlers.current.listen(pool, logger: app.logger))
            app.add(Job.every(5, "erase-deleted-accounts", logger: app.logger) { try handlers.eraseDueAccounts() })
            app.add(Job.every(3600, "delete-old-login-failures", logger: app.logger) {
                try pool.withConnection { c in
                    try AuthStorage().deleteOldFailures(c)
                    try AuthStorage().deleteOldMailRequests(c)
                }
            })
            app.add(handlers.lookups.cleanup(pool, logger: app.logger))
            if let google, !google.keys.refresh() { app.logger.warn("Google's key set could not be fetched yet (GOOGLE_JWKS_URL)") }
            if let apple {
                if !apple.keys.refresh() { app.logger.warn("Apple's key set could not be fetched yet (APPLE_JWKS_URL)") }
                app.add(Job.every(5, "revoke-apple-tokens", logger: app.logger) { try handlers.revokeAppleTokens(apple) })
            }
            return makeRoutes(handlers, SessionAuthenticator(keys: keys, pool: pool), google: google, apple: apple, moderators: moderators,
                              services: app.config.serviceToken, clients: clients)
        }
    }

    /// `SIGNING_KEY_ENCRYPTION_KEY`: 32 bytes, base64url, that seal the signing keys' seeds in the database.
    static func sealingKey(_ environment: Environment) throws -> [UInt8]? {
        guard let text = environment.optional("SIGNING_KEY_ENCRYPTION_KEY") else { return nil }
        guard let key = Base64URL.decode(text), key.count == 32 else {
            throw ConfigError(variable: "SIGNING_KEY_ENCRYPTION_KEY", problem: "must be 32 bytes, base64url (e.g. from `head -c 32 /dev/urandom | basenc --base64url`)")
        }
        return key
    }
}
