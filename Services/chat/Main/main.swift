import ChatCore
import ServiceKit

ServiceApp.main(service: "chat") { try ChatService.makeApp(environment: $0) }
