import AuthCore
import ServiceKit

ServiceApp.main(service: "auth") { try AuthService.makeApp(environment: $0) }
