import CurationCore
import ServiceKit

ServiceApp.main(service: "curation") { try CurationService.makeApp(environment: $0) }
