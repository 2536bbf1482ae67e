/// The apps one backend serves, defined once: what a mail (and a page, a push) says it comes from, its colour, and the
/// id the app's builds send as `X-Client-Id` (`<app>-<platform>`, e.g. `tapestry-ios`). auth accepts the client ids
/// its `CLIENT_IDS` setting lists (all of them by default) and carries the app into the events that make mails;
/// notify speaks as that app (its sender address overridden by `APP_MAIL_FROM`). A request that names no app is the
/// backend's own, as before there were apps: the deployment's `MAIL_FROM_NAME`, neutral colours.
public struct ClientApp: Sendable, Equatable {
    /// `tapestry`, `mesajem`, `chat`, `youstudy`: the `app` of events, device registrations and links (`?app=`).
    public let id: String
    /// What a person calls it: a mail's `From` display name, a page's title.
    public let name: String
    /// The colour of its buttons and headings (`#rrggbb`).
    public let accent: String

    public static let all = [
        ClientApp(id: "tapestry", name: "Tapestry", accent: "#9c4a2f"),
        ClientApp(id: "mesajem", name: "Mesajem", accent: "#0b7a5a"),
        ClientApp(id: "chat", name: "Team Chat", accent: "#3b5bdb"),
        ClientApp(id: "youstudy", name: "YouStudy", accent: "#c2255c"),
    ]

    /// The builds a client id may name.
    public static let platforms = ["ios", "android", "web"]

    /// The colour of what belongs to no app.
    public static let neutralAccent = "#2b59c3"

    /// Every client id there can be: each app on each platform.
    public static var clientIds: [String] { all.flatMap { app in platforms.map { app.id + "-" + $0 } } }

    /// The app of that id (nil for none, or one that is not in the table).
    public static func named(_ id: String?) -> ClientApp? { all.first { $0.id == id } }

    /// The app a client id (`<app>-<platform>`) names; nil for one of no app here.
    public static func of(clientId: String?) -> ClientApp? {
        guard let clientId, let dash = clientId.lastIndex(of: "-"), platforms.contains(String(clientId[clientId.index(after: dash)...])) else {
            return nil
        }
        return named(String(clientId[..<dash]))
    }
}
