import Features
import HTTP
import Web

/// The notify API: the table of routes, nothing else.
func makeRoutes(_ h: NotifyHandlers, _ auth: any Authenticator, services: SharedSecret) -> Router {
    var r = Router()
    r.addExport(services: services) { user in try h.pool.withConnection { try h.storage.export($0, user) } }
    r.add("GET", "/v1/notifications", summary: "What was sent to me, and when: the newest first",
          response: (200, PageResponse<DeliveryView>.shape), auth: auth, h.list)
    r.query("GET", "/v1/notifications", QueryParameter.page + [
        QueryParameter("channel", .oneOf(["email", "push", "app"]), "Only these: app is the app's own list of notices"),
        QueryParameter("unread", .boolean, "true: only those I have not marked read", default: "false"),
    ])
    r.add("POST", "/v1/notifications/{id}/read", summary: "Mark a notification of mine read (with its pushes)",
          response: (200, DeliveryView.shape), auth: auth, h.markRead)
    r.add("POST", "/v1/notifications/read", summary: "Mark every notification of mine read", response: (204, nil), auth: auth, h.markAllRead)
    r.add("GET", "/v1/notifications/preferences", summary: "What I get, by kind and channel", response: (200, ItemList<PreferenceView>.shape),
          auth: auth, h.preferences)
    r.add("PUT", "/v1/notifications/preferences/{kind}/{channel}", summary: "Turn one kind of notification by one channel on or off",
          body: PreferenceBody.self, response: (200, PreferenceView.shape), auth: auth, h.setPreference)
    r.add("GET", "/v1/notifications/quiet-hours", summary: "My quiet hours (404 when I have none)", response: (200, QuietHoursView.shape),
          auth: auth, h.quietHours)
    r.add("PUT", "/v1/notifications/quiet-hours", summary: "Set my quiet hours: pushes wait until they end, but for a courier's offers",
          body: QuietHoursBody.self, response: (200, QuietHoursView.shape), auth: auth, h.setQuietHours)
    r.add("DELETE", "/v1/notifications/quiet-hours", summary: "No quiet hours", response: (204, nil), auth: auth, h.clearQuietHours)
    // A mail's unsubscribe link (RFC 8058): opened, a page with a button; posted (one click, by the mail client), done.
    r.add("GET", "/v1/notifications/unsubscribe", summary: "A mail's unsubscribe link, opened: a page with the button that unsubscribes",
          response: (200, nil), h.unsubscribePage)
    r.add("POST", "/v1/notifications/unsubscribe", summary: "Unsubscribe without signing in (RFC 8058 one-click, or the page's button)",
          response: (200, nil), h.unsubscribeByLink)
    for method in ["GET", "POST"] {
        r.query(method, "/v1/notifications/unsubscribe", [QueryParameter("token", .string(max: 64), "The token the mail's link carried")])
        r.alsoAnswers(method, "/v1/notifications/unsubscribe", 200, contentType: "text/html; charset=utf-8")
    }
    // Without VAPID_PRIVATE_KEY there is no Web Push: these answer 404.
    r.add("GET", "/v1/push/key", summary: "The VAPID public key to subscribe with (the applicationServerKey)",
          response: (200, PushKeyView.shape), auth: auth, h.pushKey)
    r.add("GET", "/v1/push/subscriptions", summary: "My push subscriptions", response: (200, ItemList<SubscriptionView>.shape),
          auth: auth, h.subscriptions)
    r.add("POST", "/v1/push/subscriptions", summary: "Register a push subscription: the PushSubscription JSON a browser gives (again: replaced)",
          body: PushSubscriptionBody.self, response: (201, SubscriptionView.shape), auth: auth, h.subscribe)
    r.add("DELETE", "/v1/push/subscriptions/{id}", summary: "Remove a push subscription of mine", response: (204, nil), auth: auth,
          h.unsubscribe)
    // Without APNs and FCM there is no native push: these answer 404.
    r.add("GET", "/v1/push/devices", summary: "My devices registered for native push (APNs, FCM)", response: (200, ItemList<DeviceView>.shape),
          auth: auth, h.devices)
    r.add("POST", "/v1/push/devices", summary: "Register an app's device token (201; a token known already: 200, now mine)",
          body: DeviceBody.self, response: (201, DeviceView.shape), auth: auth, h.registerDevice)
    r.alsoAnswers("POST", "/v1/push/devices", 200, schema: DeviceView.shape.jsonText,
                  description: "The token was registered already: now mine, with these details")
    r.add("DELETE", "/v1/push/devices/{id}", summary: "Remove a device of mine", response: (204, nil), auth: auth, h.removeDevice)
    return r
}
