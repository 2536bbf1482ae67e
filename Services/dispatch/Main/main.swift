import DispatchCore
import ServiceKit

ServiceApp.main(service: "dispatch") { try DispatchService.makeApp(environment: $0) }
