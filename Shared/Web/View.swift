import Foundation
import HTTP
import Models

/// A response described once. A view lists its fields, each with the name a client reads, the property it comes from
/// and, where the type does not say enough, its shape; from that one list the kit writes the JSON (straight into
/// bytes, in the order listed), the route's OpenAPI schema, and in debug builds checks every answer against it.
///
///     struct PersonView: View {
///         let id: UUID
///         let name: String?
///         static let fields: [ViewField<Self>] = [.field("id", \.id), .nullable("name", \.name)]
///     }
public protocol View: ViewValue, JSONWritable {
    static var fields: [ViewField<Self>] { get }
}

extension View {
    public func write(to json: inout JSONOutput) {
        json.object { json in for field in Self.fields { field.write(self, &json) } }
    }

    /// The shape of the view: an object with its fields and no others.
    public static var shape: Schema { .object(Schema.Members(fields.map { ($0.name, $0.member) })) }
}

/// One field of a view. Its property comes as a key-path literal (`\.name`) turned into a function, and the factories
/// are inlinable: each field's reader is then compiled where its view is declared, for its own types. Through a
/// `KeyPath` and the generic closures, the runtime projected the path and looked up the field's type's metadata for
/// every value written (10% of a page of chat messages' instructions, 6% of `users/me`'s, under callgrind).
public struct ViewField<V>: @unchecked Sendable {  // key-path literals capture nothing
    @usableFromInline let name: String
    @usableFromInline let member: Schema.Member
    @usableFromInline let write: (V, inout JSONOutput) -> Void

    @usableFromInline init(name: String, member: Schema.Member, write: @escaping (V, inout JSONOutput) -> Void) {
        self.name = name; self.member = member; self.write = write
    }

    /// Always present, never null. `shape` narrows the type's own (`.oneOf([...])` for a `String`, say).
    @inlinable public static func field<T: ViewValue>(_ name: String, _ path: @escaping (V) -> T, _ shape: Schema? = nil) -> ViewField {
        let key = JSONOutput.keyBytes(name)
        return ViewField(name: name, member: .required(shape ?? T.shape)) { view, json in
            json.key(key)
            path(view).write(to: &json)
        }
    }

    /// Always present, `null` when there is none.
    @inlinable public static func nullable<T: ViewValue>(_ name: String, _ path: @escaping (V) -> T?, _ shape: Schema? = nil) -> ViewField {
        let key = JSONOutput.keyBytes(name)
        return ViewField(name: name, member: .nullable(shape ?? T.shape)) { view, json in
            json.key(key)
            if let value = path(view) { value.write(to: &json) } else { json.null() }
        }
    }

    /// Left out when the outer optional is nil (a field only some answers carry), `null` when the inner one is.
    @inlinable public static func omittedOrNull<T: ViewValue>(_ name: String, _ path: @escaping (V) -> T??, _ shape: Schema? = nil) -> ViewField {
        let key = JSONOutput.keyBytes(name)
        return ViewField(name: name, member: .optional(shape ?? T.shape)) { view, json in
            guard let outer = path(view) else { return }
            json.key(key)
            if let value = outer { value.write(to: &json) } else { json.null() }
        }
    }

    /// Left out when there is none (a field only some answers carry).
    @inlinable public static func omitted<T: ViewValue>(_ name: String, _ path: @escaping (V) -> T?, _ shape: Schema? = nil) -> ViewField {
        let key = JSONOutput.keyBytes(name)
        return ViewField(name: name, member: .absentOrValue(shape ?? T.shape)) { view, json in
            guard let value = path(view) else { return }
            json.key(key)
            value.write(to: &json)
        }
    }
}

/// A value a view's field may hold: how it is written, and its shape unless the field narrows it.
public protocol ViewValue {
    static var shape: Schema { get }
    func write(to json: inout JSONOutput)
}

extension String: ViewValue {
    public static var shape: Schema { .string() }
    public func write(to json: inout JSONOutput) { json.string(self) }
}

extension Int: ViewValue {
    public static var shape: Schema { .integer(Int.min...Int.max) }
    public func write(to json: inout JSONOutput) { json.int(self) }
}

extension Int64: ViewValue {
    public static var shape: Schema { .integer(Int.min...Int.max) }
    public func write(to json: inout JSONOutput) { json.int(Int(self)) }
}

extension Double: ViewValue {
    public static var shape: Schema { .number(-Double.greatestFiniteMagnitude...Double.greatestFiniteMagnitude) }
    public func write(to json: inout JSONOutput) { json.double(self) }
}

extension Bool: ViewValue {
    public static var shape: Schema { .boolean }
    public func write(to json: inout JSONOutput) { json.bool(self) }
}

/// In its canonical lower-case form.
extension UUID: ViewValue {
    public static var shape: Schema { .uuid }
    public func write(to json: inout JSONOutput) { json.string(self) }
}

/// As RFC 3339 with milliseconds, in UTC (`Timestamp.format`).
extension Date: ViewValue {
    public static var shape: Schema { .dateTime }
    public func write(to json: inout JSONOutput) { json.string(self) }
}

extension Array: ViewValue where Element: ViewValue {
    public static var shape: Schema { .array(Element.shape, count: 0...Int.max) }
    public func write(to json: inout JSONOutput) { json.array(self) { json, element in element.write(to: &json) } }
}

// MARK: - Lists and pages

/// A whole list, not paged: `{"items": [...]}`.
public struct ItemList<Item: View>: View {
    public let items: [Item]
    public init(_ items: [Item]) { self.items = items }
    public static var fields: [ViewField<Self>] { [.field("items", \.items)] }
}

extension PageResponse: ViewValue, JSONWritable, View where Item: View {
    public static var fields: [ViewField<Self>] { [.field("items", \.items), .nullable("nextCursor", \.nextCursor)] }
}

// MARK: - Checking answers

extension Schema {
    /// In debug builds (the tests'), stops the process when `response` is the answer `status` describes and its body
    /// does not fit this shape: every test that causes such an answer fails, naming the route and the field.
    func check(_ response: Response, status: Int, route: String) {
        #if DEBUG
        guard response.status == status, response.stream == nil, !response.body.isEmpty,
              response.headers.contains(where: { $0.0.lowercased() == "content-type" && $0.1.hasPrefix("application/json") })
        else { return }  // another answer the route documents (an HTML rendering)
        do {
            _ = try validate(try JSONParser.parse(response.body), path: "")
        } catch {
            let field = (error as? HTTPError)?.field.map { " (\($0))" } ?? ""
            fatalError("\(route) answered \(status) with a body its schema does not describe\(field): \(error)\n"
                       + String(decoding: response.body.prefix(2000), as: UTF8.self))
        }
        #endif
    }
}
