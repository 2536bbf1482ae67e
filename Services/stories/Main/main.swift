import ServiceKit
import StoriesCore

ServiceApp.main(service: "stories") { try StoriesService.makeApp(environment: $0) }
