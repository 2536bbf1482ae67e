import Foundation
import Synchronization

/// A JSON Schema (2020-12) validator: jsonschema-rs, a complete implementation (in the project's venv through
/// schemathesis), with formats checked (`uuid`, `date-time`, ...), every keyword the schemas use included
/// (`minimum`, `maximum`, `oneOf`, ...). It runs in one Python process for the whole test run, a line of JSON in
/// and a line out per check, so a probe can check every event it reads.
struct SchemaValidator {
    let schema: [String: Any]

    /// Loads `Shared/Models/Schemas/<type>.json`.
    static func event(_ type: String) throws -> SchemaValidator {
        let url = TestEnvironment.root.appendingPathComponent("Shared/Models/Schemas/\(type).json")
        let data = try Data(contentsOf: url)
        return SchemaValidator(schema: try JSONSerialization.jsonObject(with: data) as! [String: Any])
    }

    /// The problems found (empty when valid), each with where it is (`$/data/email: ...`).
    func validate(_ value: Any) -> [String] {
        do {
            let job = try JSONSerialization.data(withJSONObject: ["schema": schema, "instance": value], options: [.fragmentsAllowed])
            return try Self.process.withLock { try $0.check(job) }
        } catch {
            return ["the validator could not run: \(error)"]
        }
    }

    private static let process = Mutex(ValidatorProcess())
}

/// The Python side: reads a job a line, answers a line (a JSON list of problems); validators are kept per schema.
private final class ValidatorProcess {
    private static let script = """
        import json, sys
        import jsonschema_rs
        validators = {}
        for line in sys.stdin:
            try:
                job = json.loads(line)
                key = json.dumps(job["schema"], sort_keys=True)
                if key not in validators:
                    validators[key] = jsonschema_rs.validator_for(job["schema"], validate_formats=True)
                problems = ["$/" + "/".join(str(p) for p in e.instance_path) + ": " + e.message
                            for e in validators[key].iter_errors(job["instance"])]
            except Exception as error:  # a schema it cannot compile: an answer, not a dead process
                problems = ["the validator failed: " + repr(error)]
            print(json.dumps(problems), flush=True)
        """
    private var running: (process: Process, input: FileHandle, output: FileHandle)?
    private var buffer = Data()

    func check(_ job: Data) throws -> [String] {
        if running?.process.isRunning != true { try start() }
        guard let (_, input, output) = running else { throw TestFailure("no validator") }
        input.write(job + Data("\n".utf8))
        var end = buffer.firstIndex(of: UInt8(ascii: "\n"))
        while end == nil {
            let more = output.availableData
            guard !more.isEmpty else { running = nil; throw TestFailure("the validator ended") }
            buffer.append(more)
            end = buffer.firstIndex(of: UInt8(ascii: "\n"))
        }
        let line = buffer[buffer.startIndex..<end!]
        buffer = Data(buffer[(end! + 1)...])
        guard let problems = try JSONSerialization.jsonObject(with: line) as? [String] else {
            throw TestFailure("the validator answered \(String(decoding: line, as: UTF8.self))")
        }
        return problems
    }

    private func start() throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: try TestEnvironment.venvPython())
        p.arguments = ["-c", Self.script]
        let input = Pipe(), output = Pipe()
        p.standardInput = input
        p.standardOutput = output
        try p.run()
        running = (p, input.fileHandleForWriting, output.fileHandleForReading)
        buffer = Data()
    }
}
