// swift-tools-version: 6.0
// The backend: six services over one shared kit. No package dependencies:
// C libraries from Debian come in through the systemLibrary targets below.
import PackageDescription

/// One list of Swift settings for every target (Swift 6 mode implies complete concurrency checking).
let settings: [SwiftSetting] = [.swiftLanguageMode(.v6)]

/// What a service core builds on: the kit and the wrappers it may call directly.
let kit: [Target.Dependency] = ["ServiceKit", "Runtime", "Web", "Events", "Identity", "Features", "Models", "HTTP", "Postgres",
                                 "Crypto"]

func system(_ name: String, _ pkg: String, _ apt: String) -> Target {
    .systemLibrary(name: name, path: "Shared/\(name)", pkgConfig: pkg, providers: [.apt([apt])])
}

let package = Package(
    name: "Backend",
    products: [
        .executable(name: "auth", targets: ["auth"]),
        .executable(name: "stories", targets: ["stories"]),
        .executable(name: "chat", targets: ["chat"]),
        .executable(name: "curation", targets: ["curation"]),
        .executable(name: "dispatch", targets: ["DispatchMain"]),
        .executable(name: "notify", targets: ["notify"]),
    ],
    targets: [
        // MARK: - C libraries
        system("CLibPQ", "libpq", "libpq-dev"),
        system("CRdKafka", "rdkafka", "librdkafka-dev"),
        system("COpenSSL", "libcrypto", "libssl-dev"),
        system("CArgon2", "libargon2", "libargon2-dev"),
        system("CCurl", "libcurl", "libcurl4-openssl-dev"),
        system("CVips", "vips", "libvips-dev"),
        .target(name: "CShims", dependencies: ["CRdKafka"], path: "Shared/CShims"),

        // MARK: - Thin wrappers (the only code that imports a C module)
        .target(name: "Postgres", dependencies: ["CLibPQ", "Models"], path: "Shared/Postgres", swiftSettings: settings),
        .target(name: "Kafka", dependencies: ["CRdKafka", "CShims"], path: "Shared/Kafka", swiftSettings: settings),
        .target(name: "HTTP", dependencies: ["CShims"], path: "Shared/HTTP", swiftSettings: settings),
        .target(name: "Crypto", dependencies: ["COpenSSL", "CArgon2"], path: "Shared/Crypto", swiftSettings: settings),
        // Sending mail over SMTP (STARTTLS, AUTH) with libcurl.
        .target(name: "Mail", dependencies: ["CCurl"], path: "Shared/Mail", swiftSettings: settings),
        // Sending Web Push messages: VAPID, aes128gcm encryption (RFC 8291/8292), and the POST with libcurl.
        .target(name: "Push", dependencies: ["CCurl", "Crypto"], path: "Shared/Push", swiftSettings: settings),
        // Uploaded photos: decoded with a pixel limit, upright, re-encoded without metadata, renditions, a BlurHash.
        .target(name: "Imaging", dependencies: ["CVips"], path: "Shared/Imaging", swiftSettings: settings),
        // Card payments: the provider interface and its Stripe client (HTTP through `Fetch`), webhook signatures.
        .target(name: "Payments", dependencies: ["HTTP", "Crypto"], path: "Shared/Payments", swiftSettings: settings),

        // MARK: - Platform: what every service is made of, each module on the ones above it
        .target(name: "Geo", path: "Shared/Geo", swiftSettings: settings),
        .target(name: "Models", path: "Shared/Models", exclude: ["Schemas"], swiftSettings: settings),
        // The process: logging, trace context, metrics, background services and their stop.
        .target(name: "Runtime", dependencies: ["HTTP", "Models"], path: "Shared/Runtime", swiftSettings: settings),
        // The web layer: bodies, views, errors, pagination, route declarations, middleware, OpenAPI, idempotency.
        .target(name: "Web", dependencies: ["Runtime", "HTTP", "Postgres", "Crypto", "Models"], path: "Shared/Web",
                swiftSettings: settings),
        // Events: the outbox and its relay, consumers (de-duplication, dead letters), live feeds.
        .target(name: "Events", dependencies: ["Runtime", "Web", "Kafka", "Postgres", "Models", "HTTP"], path: "Shared/Events",
                swiftSettings: settings),
        // Identity: tokens, their verifier, revoked sessions, stream tickets, the service token.
        .target(name: "Identity", dependencies: ["Runtime", "Web", "Events", "Kafka", "Crypto", "Postgres", "Models", "HTTP"],
                path: "Shared/Identity", swiftSettings: settings),
        // Product pieces more than one service offers: membership by invite code, media, profiles.
        .target(name: "Features", dependencies: ["Web", "Events", "Postgres", "Crypto", "Models", "HTTP", "Imaging"],
                path: "Shared/Features", swiftSettings: settings),
        // The application: settings, and the app that assembles the above into a service and runs it.
        .target(name: "ServiceKit", dependencies: ["CShims", "Postgres", "Kafka", "HTTP", "Crypto", "Models", "Runtime", "Web",
                                                   "Events", "Identity"],
                path: "Shared/ServiceKit", swiftSettings: settings),
        // A blocking HTTP/1.1 client that shows the wire, for tests and load tools (services call out with `Fetch`).
        .target(name: "WireClient", path: "Shared/WireClient", swiftSettings: settings),

        // MARK: - Services: a core library each (routes, handlers, domain, storage, migrations, settings), started by
        // a thin executable, so a test can run a service in-process
        .target(name: "AuthCore", dependencies: kit, path: "Services/auth/Core", swiftSettings: settings),
        .executableTarget(name: "auth", dependencies: ["AuthCore", "ServiceKit"], path: "Services/auth/Main", swiftSettings: settings),
        .target(name: "StoriesCore", dependencies: kit, path: "Services/stories/Core", swiftSettings: settings),
        .executableTarget(name: "stories", dependencies: ["StoriesCore", "ServiceKit"], path: "Services/stories/Main",
                          swiftSettings: settings),
        .target(name: "ChatCore", dependencies: kit, path: "Services/chat/Core", swiftSettings: settings),
        .executableTarget(name: "chat", dependencies: ["ChatCore", "ServiceKit"], path: "Services/chat/Main", swiftSettings: settings),
        .target(name: "CurationCore", dependencies: kit, path: "Services/curation/Core", swiftSettings: settings),
        .executableTarget(name: "curation", dependencies: ["CurationCore", "ServiceKit"], path: "Services/curation/Main",
                          swiftSettings: settings),
        .target(name: "DispatchCore", dependencies: kit + ["Geo", "Payments"], path: "Services/dispatch/Core", swiftSettings: settings),
        // Not named `dispatch`: an executable's entry point is `<module>_main`, and `dispatch_main` is libdispatch's
        // (a static link, as in the container images, fails on the duplicate).
        .executableTarget(name: "DispatchMain", dependencies: ["DispatchCore", "ServiceKit"], path: "Services/dispatch/Main",
                          swiftSettings: settings),

        .target(name: "NotifyCore", dependencies: kit + ["Mail", "Push"], path: "Services/notify/Core", swiftSettings: settings),
        .executableTarget(name: "notify", dependencies: ["NotifyCore", "ServiceKit"], path: "Services/notify/Main", swiftSettings: settings),

        // MARK: - Benchmarks
        .executableTarget(name: "dispatch-load", dependencies: ["WireClient", "Postgres", "Models", "HTTP"], path: "bench/dispatch-load",
                          swiftSettings: settings),
        .executableTarget(name: "chat-fanout", dependencies: ["WireClient", "CShims"], path: "bench/chat-fanout", swiftSettings: settings),
        .executableTarget(name: "geo-bench", dependencies: ["Geo", "Postgres"], path: "bench/geo-bench", swiftSettings: settings),
        .executableTarget(name: "media-bench", dependencies: ["Imaging"], path: "bench/media-bench", swiftSettings: settings),

        // MARK: - Tests
        .testTarget(name: "ServiceKitTests", dependencies: ["ServiceKit", "Runtime", "Web", "Events", "Identity", "Features",
                                                          "WireClient", "HTTP", "Crypto", "Postgres", "Models", "Geo"],
                    path: "Tests/ServiceKitTests", exclude: ["h11_differential.py"], swiftSettings: settings),
        .testTarget(name: "ImagingTests", dependencies: ["Imaging"], path: "Tests/ImagingTests", exclude: ["camera_photo.py"],
                    swiftSettings: settings),
        .testTarget(name: "StoriesCoreTests", dependencies: ["StoriesCore", "Models"], path: "Tests/StoriesCoreTests", swiftSettings: settings),
        .testTarget(name: "AuthCoreTests", dependencies: ["AuthCore", "Crypto"], path: "Tests/AuthCoreTests", swiftSettings: settings),
        .testTarget(name: "ChatCoreTests", dependencies: ["ChatCore"], path: "Tests/ChatCoreTests", swiftSettings: settings),
        .testTarget(name: "CurationCoreTests", dependencies: ["CurationCore"], path: "Tests/CurationCoreTests", swiftSettings: settings),
        .testTarget(name: "NotifyCoreTests", dependencies: ["NotifyCore"], path: "Tests/NotifyCoreTests", swiftSettings: settings),
        .testTarget(name: "DispatchCoreTests", dependencies: ["DispatchCore", "Web"], path: "Tests/DispatchCoreTests", swiftSettings: settings),
        .testTarget(name: "IntegrationTests", dependencies: ["ServiceKit", "Runtime", "Web", "Events", "Identity", "Features",
                                                             "WireClient", "HTTP", "Kafka", "Postgres", "Models",
                                                             "AuthCore", "StoriesCore", "ChatCore", "DispatchCore",
                                                             "CurationCore", "NotifyCore", "Mail", "Push", "Payments", "Imaging"],
                    path: "Tests/IntegrationTests", exclude: ["browser_driver.py", "browser_origin.py"], swiftSettings: settings),
    ]
)
