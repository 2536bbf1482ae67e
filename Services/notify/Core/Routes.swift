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
    // Without VAPID_PRIVATE_KEY there is no Web Push: these answer 404.
    r.add("GET", "/v1/push/key", summary: "The VAPID public key to subscribe with (the applicationServerKey)",
          response: (200, PushKeyView.shape), auth: auth, h.pushKey)
    r.add("GET", "/v1/push/subscriptions", summary: "My push subscriptions", response: (200, ItemList<SubscriptionView>.shape),
          auth: auth, h.subscriptions)
    r.add("POST", "/v1/push/subscriptions", summary: "Register a push subscription: the PushSubscription JSON a browser gives (again: replaced)",
          body: PushSubscriptionBody.self, response: (201, SubscriptionView.shape), auth: auth, h.subscribe)
    r.add("DELETE", "/v1/push/subscriptions/{id}", summary: "Remove a push subscription of mine", response: (204, nil), auth: auth,
          h.unsubscribe)
    return r
}
