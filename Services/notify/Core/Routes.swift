import Features
import HTTP
import Web

/// The notify API: the table of routes, nothing else.
func makeRoutes(_ h: NotifyHandlers, _ auth: any Authenticator, services: SharedSecret) -> Router {
    var r = Router()
    r.addExport(services: services) { user in try h.pool.withConnection { try h.storage.export($0, user) } }
    r.group("/v1/notifications", .user(auth)) { notifications in
        notifications.add("GET", "", "What was sent to me, and when: the newest first",
                          answers: (200, PageResponse<DeliveryView>.shape), query: QueryParameter.page + [
            QueryParameter("channel", .oneOf(["email", "push", "app"]), "Only these: app is the app's own list of notices"),
            QueryParameter("unread", .boolean, "true: only those I have not marked read", default: "false"),
        ], h.list)
        notifications.add("POST", "/{id}/read", "Mark a notification of mine read (with its pushes)",
                          answers: (200, DeliveryView.shape), h.markRead)
        notifications.add("POST", "/read", "Mark every notification of mine read", answers: (204, nil), h.markAllRead)
        notifications.add("GET", "/preferences", "What I get, by kind and channel", answers: (200, ItemList<PreferenceView>.shape),
                          h.preferences)
        notifications.add("PUT", "/preferences/{kind}/{channel}", "Turn one kind of notification by one channel on or off",
                          body: PreferenceBody.self, answers: (200, PreferenceView.shape), h.setPreference)
        notifications.add("GET", "/quiet-hours", "My quiet hours (404 when I have none)", answers: (200, QuietHoursView.shape),
                          h.quietHours)
        notifications.add("PUT", "/quiet-hours", "Set my quiet hours: pushes wait until they end, but for a courier's offers",
                          body: QuietHoursBody.self, answers: (200, QuietHoursView.shape), h.setQuietHours)
        notifications.add("DELETE", "/quiet-hours", "No quiet hours", answers: (204, nil), h.clearQuietHours)
    }
    // A mail's unsubscribe link (RFC 8058): opened, a page with a button; posted (one click, by the mail client), done.
    r.group("/v1/notifications", .everyone) { link in
        let token = [QueryParameter("token", .string(max: 64), "The token the mail's link carried")]
        let page = RouteGroup<Void>.Also.answer(200, contentType: "text/html; charset=utf-8")
        link.add("GET", "/unsubscribe", "A mail's unsubscribe link, opened: a page with the button that unsubscribes",
                 answers: (200, nil), query: token, also: [page], h.unsubscribePage)
        link.add("POST", "/unsubscribe", "Unsubscribe without signing in (RFC 8058 one-click, or the page's button)",
                 answers: (200, nil), query: token, also: [page], h.unsubscribeByLink)
    }
    r.group("/v1/push", .user(auth)) { push in
        // Without VAPID_PRIVATE_KEY there is no Web Push: these answer 404.
        push.add("GET", "/key", "The VAPID public key to subscribe with (the applicationServerKey)",
                 answers: (200, PushKeyView.shape), h.pushKey)
        push.add("GET", "/subscriptions", "My push subscriptions", answers: (200, ItemList<SubscriptionView>.shape), h.subscriptions)
        push.add("POST", "/subscriptions", "Register a push subscription: the PushSubscription JSON a browser gives (again: replaced)",
                 body: PushSubscriptionBody.self, answers: (201, SubscriptionView.shape), h.subscribe)
        push.add("DELETE", "/subscriptions/{id}", "Remove a push subscription of mine", answers: (204, nil), h.unsubscribe)
        // Without APNs and FCM there is no native push: these answer 404.
        push.add("GET", "/devices", "My devices registered for native push (APNs, FCM)", answers: (200, ItemList<DeviceView>.shape),
                 h.devices)
        push.add("POST", "/devices", "Register an app's device token (201; a token known already: 200, now mine)",
                 body: DeviceBody.self, answers: (201, DeviceView.shape),
                 also: [.answer(200, schema: DeviceView.shape,
                                description: "The token was registered already: now mine, with these details")], h.registerDevice)
        push.add("DELETE", "/devices/{id}", "Remove a device of mine", answers: (204, nil), h.removeDevice)
    }
    return r
}
