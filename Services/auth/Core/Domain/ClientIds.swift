import Foundation
import HTTP
import Models
import Runtime
import Web

/// Which app a request comes from: the client id its build sends as `X-Client-Id` (`<app>-<platform>`, the apps of
/// `ClientApp`), among those `CLIENT_IDS` accepts (comma-separated; unset: every app on every platform). The routes
/// whose mails speak as an app read it; an id not accepted is 400 naming it, none is the backend's own (as before).
struct ClientIds: Sendable {
    let accepted: [String]

    init(_ environment: Environment) throws {
        guard let text = environment.optional("CLIENT_IDS") else { accepted = ClientApp.clientIds; return }
        let ids = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        for id in ids where ClientApp.of(clientId: id) == nil {
            throw ConfigError(variable: "CLIENT_IDS", problem: "\"\(id)\" is not <app>-<platform> with an app among "
                + ClientApp.all.map(\.id).joined(separator: ", ") + " and a platform among " + ClientApp.platforms.joined(separator: ", "))
        }
        guard !ids.isEmpty else { throw ConfigError(variable: "CLIENT_IDS", problem: "names no client id (unset it to accept every app's)") }
        accepted = ids
    }

    /// The header as a route declares it: documented with the accepted ids, checked by the kit before the handler.
    var header: QueryParameter {
        let accepted = accepted
        // An empty header is no header (as the kit reads headers), so the document lists "" too.
        return QueryParameter("X-Client-Id", schema: Schema.oneOf(accepted + [""]).jsonText,
                              "The app this request comes from: its mails speak as that app and link to it (absent or empty: the backend's own)") { value in
            accepted.contains(value) ? nil : .validation("X-Client-Id \"\(value.prefix(64))\" is not a client of this server: it takes "
                                                         + accepted.joined(separator: ", ") + ".", field: "X-Client-Id")
        }
    }
}

extension Request {
    /// The app (`ClientApp.id`) its `X-Client-Id` names, checked by the route's declared header; nil for none.
    var clientApp: String? { ClientApp.of(clientId: nonEmptyHeader("x-client-id"))?.id }
}
