import Features
import HTTP
import Web

/// The notify API: the table of routes, nothing else.
func makeRoutes(_ h: NotifyHandlers, _ auth: any Authenticator, services: SharedSecret) -> Router {
    var r = Router()
    r.addExport(services: services) { user in try h.pool.withConnection { try h.storage.export($0, user) } }
    r.add("GET", "/v1/notifications", summary: "What was sent to me, and when: the newest first",
          response: (200, PageResponse<DeliveryView>.shape), auth: auth, h.list)
    r.query("GET", "/v1/notifications", QueryParameter.page)
    return r
}
