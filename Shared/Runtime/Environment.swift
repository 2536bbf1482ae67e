import Foundation

/// A setting that is missing or malformed; the process stops at start with one line naming it.
public struct ConfigError: Error, CustomStringConvertible {
    /// The environment variable.
    public let variable: String
    /// What is wrong, without echoing secrets.
    public let problem: String
    public var description: String { "invalid configuration: \(variable) \(problem)" }

    public init(variable: String, problem: String) { self.variable = variable; self.problem = problem }
}

/// Reads typed values from the environment with defaults.
public struct Environment: Sendable {
    let values: [String: String]

    public init(_ values: [String: String] = ProcessInfo.processInfo.environment) { self.values = values }

    /// A string, or the default when unset or empty.
    public func string(_ name: String, default value: String) -> String {
        guard let v = values[name], !v.isEmpty else { return value }
        return v
    }

    /// An optional string (nil when unset or empty).
    public func optional(_ name: String) -> String? {
        guard let v = values[name], !v.isEmpty else { return nil }
        return v
    }

    /// `PUBLIC_BASE_URL`: the origin clients reach the API at (the gateway), without a trailing slash; unset, the
    /// service itself on `port` (a stack without a gateway).
    public func publicBaseURL(port: Int) throws -> String {
        let base = string("PUBLIC_BASE_URL", default: "http://127.0.0.1:\(port)")
        guard let url = URL(string: base), ["http", "https"].contains(url.scheme ?? ""), url.host != nil, url.query == nil else {
            throw ConfigError(variable: "PUBLIC_BASE_URL", problem: "must be an http(s) URL such as https://api.example.com")
        }
        return base.hasSuffix("/") ? String(base.dropLast()) : base
    }

    /// An integer in `range`.
    public func int(_ name: String, default value: Int, range: ClosedRange<Int>) throws -> Int {
        guard let text = optional(name) else { return value }
        guard let v = Int(text.trimmingCharacters(in: .whitespaces)), range.contains(v) else {
            throw ConfigError(variable: name, problem: "must be a whole number from \(range.lowerBound) to \(range.upperBound) (got \"\(text)\")")
        }
        return v
    }

    /// One of `choices`.
    public func choice(_ name: String, default value: String, _ choices: [String]) throws -> String {
        let v = string(name, default: value).lowercased()
        guard choices.contains(v) else {
            throw ConfigError(variable: name, problem: "must be one of \(choices.joined(separator: ", ")) (got \"\(v)\")")
        }
        return v
    }
}
