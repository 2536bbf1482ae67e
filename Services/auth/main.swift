import Models
import ServiceKit

// auth: users, sessions, credentials and signing keys (port 8081, schema `auth`).
let app = ServiceApp(service: "auth", defaultPort: 8081, migrations: migrations,
                     topics: [UserRegistered.type, UserUpdated.type, SessionRevoked.type])
let key = try app.pool.withTransaction { try AuthStorage().signingKey($0) }
let keys = SigningKeys(kid: key.kid, key: key.key)
let handlers = AuthHandlers(pool: app.pool, outbox: app.outbox, idempotency: app.idempotency, keys: keys)
app.every(seconds: 3600, "delete old login failures") { try app.pool.withConnection { try AuthStorage().deleteOldFailures($0) } }
app.run(routes: makeRoutes(handlers, SessionAuthenticator(keys: keys, pool: app.pool)))
