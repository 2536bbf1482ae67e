import Foundation
import Models

/// A JSON Schema (2020-12) validator for the keywords our schemas use: type, required, properties,
/// additionalProperties, const, enum, format (uuid, date-time), pattern, minLength, maxLength, items, oneOf.
struct SchemaValidator {
    let schema: [String: Any]

    /// Loads `Shared/Models/Schemas/<type>.json`.
    static func event(_ type: String) throws -> SchemaValidator {
        let url = TestEnvironment.root.appendingPathComponent("Shared/Models/Schemas/\(type).json")
        let data = try Data(contentsOf: url)
        return SchemaValidator(schema: try JSONSerialization.jsonObject(with: data) as! [String: Any])
    }

    /// The problems found (empty when valid).
    func validate(_ value: Any) -> [String] { check(value, schema, "$") }

    private func check(_ value: Any, _ schema: [String: Any], _ path: String) -> [String] {
        var errors: [String] = []
        if let c = schema["const"], !equal(c, value) { errors.append("\(path): expected \(c)") }
        if let e = schema["enum"] as? [Any], !e.contains(where: { equal($0, value) }) { errors.append("\(path): not in enum") }
        if let t = schema["type"] {
            let types = (t as? [String]) ?? [t as? String ?? ""]
            if !types.contains(where: { matches(value, $0) }) { errors.append("\(path): not of type \(types)") }
        }
        if let s = value as? String {
            if let min = schema["minLength"] as? Int, s.count < min { errors.append("\(path): shorter than \(min)") }
            if let max = schema["maxLength"] as? Int, s.count > max { errors.append("\(path): longer than \(max)") }
            if let p = schema["pattern"] as? String, s.range(of: p, options: .regularExpression) == nil { errors.append("\(path): does not match \(p)") }
            switch schema["format"] as? String {
            case "uuid": if UUID(uuidString: s) == nil || s != s.lowercased() { errors.append("\(path): not a lower-case uuid") }
            case "date-time": if Timestamp.parse(s) == nil { errors.append("\(path): not RFC 3339") }
            default: break
            }
        }
        if let object = value as? [String: Any], !(value is NSNull) {
            for key in schema["required"] as? [String] ?? [] where object[key] == nil { errors.append("\(path): missing \(key)") }
            let properties = schema["properties"] as? [String: Any] ?? [:]
            for (key, v) in object {
                if let sub = properties[key] as? [String: Any] {
                    errors += check(v, sub, "\(path).\(key)")
                } else if schema["additionalProperties"] as? Bool == false {
                    errors.append("\(path): unexpected property \(key)")
                }
            }
        }
        if let array = value as? [Any], let items = schema["items"] as? [String: Any] {
            for (i, v) in array.enumerated() { errors += check(v, items, "\(path)[\(i)]") }
        }
        if let options = schema["oneOf"] as? [[String: Any]] {
            let passing = options.filter { check(value, $0, path).isEmpty }.count
            if passing != 1 { errors.append("\(path): matches \(passing) of oneOf") }
        }
        return errors
    }

    private func matches(_ value: Any, _ type: String) -> Bool {
        switch type {
        case "null": return value is NSNull
        case "string": return value is String
        case "boolean": return isBoolean(value)
        case "integer": if let n = value as? NSNumber, !isBoolean(value) { return n.doubleValue == n.doubleValue.rounded() }; return false
        case "number": return value is NSNumber && !isBoolean(value)
        case "object": return value is [String: Any]
        case "array": return value is [Any]
        default: return false
        }
    }

    /// JSONSerialization gives NSNumbers for both; 0 and 1 also cast to Bool, so ask the number its C type.
    private func isBoolean(_ value: Any) -> Bool {
        guard let n = value as? NSNumber else { return false }
        let type = String(cString: n.objCType)
        return type == "c" || type == "B"
    }

    private func equal(_ a: Any, _ b: Any) -> Bool {
        if let x = a as? String, let y = b as? String { return x == y }
        if let x = a as? NSNumber, let y = b as? NSNumber { return x == y }
        return false
    }
}
