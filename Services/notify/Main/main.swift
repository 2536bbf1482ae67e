import NotifyCore
import ServiceKit

ServiceApp.main(service: "notify") { try NotifyService.makeApp(environment: $0) }
