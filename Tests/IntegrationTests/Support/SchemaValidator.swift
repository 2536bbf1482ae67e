import Foundation

/// A JSON Schema (2020-12) validator: jsonschema-rs, a complete implementation (in the project's venv through
/// schemathesis), with formats checked (`uuid`, `date-time`, ...), every keyword the schemas use included
/// (`minimum`, `maximum`, `oneOf`, ...). Each call runs it once, in the venv's Python.
struct SchemaValidator {
    let schema: [String: Any]

    /// Loads `Shared/Models/Schemas/<type>.json`.
    static func event(_ type: String) throws -> SchemaValidator {
        let url = TestEnvironment.root.appendingPathComponent("Shared/Models/Schemas/\(type).json")
        let data = try Data(contentsOf: url)
        return SchemaValidator(schema: try JSONSerialization.jsonObject(with: data) as! [String: Any])
    }

    private static let script = """
        import json, sys
        import jsonschema_rs
        job = json.load(sys.stdin)
        validator = jsonschema_rs.validator_for(job["schema"], validate_formats=True)
        print(json.dumps(["$/" + "/".join(str(p) for p in e.instance_path) + ": " + e.message
                          for e in validator.iter_errors(job["instance"])]))
        """

    /// The problems found (empty when valid), each with where it is (`$/data/email: ...`).
    func validate(_ value: Any) -> [String] {
        do {
            let python = URL(fileURLWithPath: try TestEnvironment.venvPython())
            let job = try JSONSerialization.data(withJSONObject: ["schema": schema, "instance": value], options: [.fragmentsAllowed])
            let p = Process()
            p.executableURL = python
            p.arguments = ["-c", Self.script]
            let input = Pipe(), output = Pipe()
            p.standardInput = input
            p.standardOutput = output
            try p.run()
            input.fileHandleForWriting.write(job)
            try input.fileHandleForWriting.close()
            let answer = output.fileHandleForReading.readDataToEndOfFile()
            p.waitUntilExit()
            guard p.terminationStatus == 0, let problems = try JSONSerialization.jsonObject(with: answer) as? [String] else {
                return ["the validator failed: \(String(decoding: answer, as: UTF8.self))"]
            }
            return problems
        } catch {
            return ["the validator could not run: \(error)"]
        }
    }
}
