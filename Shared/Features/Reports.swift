import Foundation
import HTTP
import Postgres
import Web

/// Reports of content from users (App Store Guideline 1.2), in a service's schema (`Reports.tableSQL` in its
/// migrations): who reported what and why, and what an operator decided. A person reports a thing once (again:
/// their reason is updated); a decision settles every open report of the thing.
public struct Reports: Sendable {
    public let schema: String

    public init(schema: String) { self.schema = schema }

    public static let tableSQL = """
        CREATE TABLE reports (
            id uuid PRIMARY KEY,
            kind text NOT NULL,
            target_id uuid NOT NULL,
            author_id uuid,
            reporter_id uuid NOT NULL,
            reason text NOT NULL,
            note text,
            status text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'taken_down', 'dismissed')),
            created_at timestamptz NOT NULL DEFAULT now(),
            resolved_at timestamptz,
            UNIQUE (kind, target_id, reporter_id)
        );
        CREATE INDEX reports_open ON reports (created_at, id) WHERE status = 'open';
        CREATE INDEX reports_by_target ON reports (kind, target_id);
        """

    /// Why someone reports a thing.
    public static let reasons = ["spam", "harassment", "hate", "violence", "sexual", "self_harm", "other"]

    /// `reporter` reports `target` (a `kind` of thing by `author`); their earlier report of it is updated.
    public func file(_ c: Connection, kind: String, target: UUID, author: UUID?, reporter: UUID, reason: String, note: String?) throws
        -> ReportRecord {
        try c.one(ReportRecord.self, """
            INSERT INTO \(unescaped: schema).reports (id, kind, target_id, author_id, reporter_id, reason, note)
            VALUES (\(UUID.v7()), \(kind), \(target), \(author), \(reporter), \(reason), \(note))
            ON CONFLICT (kind, target_id, reporter_id) DO UPDATE SET reason = EXCLUDED.reason, note = EXCLUDED.note,
                status = 'open', resolved_at = NULL
            RETURNING \(ReportRecord.columns)
            """)!
    }

    /// Open reports, the oldest first.
    public func open(_ c: Connection, limit: Int) throws -> [ReportRecord] {
        try c.all(ReportRecord.self, """
            SELECT \(ReportRecord.columns) FROM \(unescaped: schema).reports WHERE status = 'open' ORDER BY created_at, id LIMIT \(limit)
            """)
    }

    /// The report, locked.
    public func report(_ c: Connection, _ id: UUID) throws -> ReportRecord? {
        try c.one(ReportRecord.self, "SELECT \(ReportRecord.columns) FROM \(unescaped: schema).reports WHERE id = \(id) FOR UPDATE")
    }

    /// Settles every open report of the reported thing with `status`.
    public func settle(_ c: Connection, _ report: ReportRecord, _ status: String) throws {
        try c.execute("""
            UPDATE \(unescaped: schema).reports SET status = \(status), resolved_at = now()
            WHERE kind = \(report.kind) AND target_id = \(report.targetId) AND status = 'open'
            """)
    }

    /// Forgets an erased account's reports, and the reports of them as a person; what they wrote that others reported
    /// stays reported, without their name.
    public func forget(_ user: UUID, on c: Connection) throws {
        try c.execute("DELETE FROM \(unescaped: schema).reports WHERE reporter_id = \(user) OR target_id = \(user)")
        try c.execute("UPDATE \(unescaped: schema).reports SET author_id = NULL WHERE author_id = \(user)")
    }
}

public struct ReportRecord: PostgresRecord, Sendable {
    public let id: UUID
    public let kind: String
    public let targetId: UUID
    public let authorId: UUID?
    public let reporterId: UUID
    public let reason: String
    public let note: String?
    public let status: String
    public let createdAt: Date
    public let resolvedAt: Date?
    /// A report changes once: when it is decided.
    public var updatedAt: Date { resolvedAt ?? createdAt }

    public static let columns: SQL = "id, kind, target_id, author_id, reporter_id, reason, note, status, created_at, resolved_at"

    public init(_ r: Row) throws {
        id = try r["id"]; kind = try r["kind"]; targetId = try r["target_id"]; authorId = try r.decode("author_id")
        reporterId = try r["reporter_id"]; reason = try r["reason"]; note = try r.decode("note"); status = try r["status"]
        createdAt = try r["created_at"]; resolvedAt = try r.decode("resolved_at")
    }
}

/// A report as the one who filed it sees it.
public struct ReportView: View {
    public let report: ReportRecord
    public init(_ r: ReportRecord) { report = r }

    public static let fields: [ViewField<Self>] = [
        .field("id", \.report.id), .field("kind", \.report.kind), .field("targetId", \.report.targetId),
        .field("reason", \.report.reason, .oneOf(Reports.reasons)), .nullable("note", \.report.note),
        .field("status", \.report.status, .oneOf(["open", "taken_down", "dismissed"])), .field("createdAt", \.report.createdAt),
        .field("updatedAt", \.report.updatedAt),
    ]
}

/// A report in the operator's queue: also who wrote the thing and who reported it.
public struct QueuedReportView: View {
    public let report: ReportRecord
    public init(_ r: ReportRecord) { report = r }

    public static let fields: [ViewField<Self>] = [
        .field("id", \.report.id), .field("kind", \.report.kind), .field("targetId", \.report.targetId),
        .nullable("authorId", \.report.authorId), .field("reporterId", \.report.reporterId),
        .field("reason", \.report.reason, .oneOf(Reports.reasons)), .nullable("note", \.report.note), .field("createdAt", \.report.createdAt),
        .field("updatedAt", \.report.updatedAt),
    ]
}

/// What a report says: a reason, and a note of 500 characters at most.
public struct ReportBody: RequestBody {
    public static let schema = Schema.object([
        "reason": .required(.oneOf(Reports.reasons)), "note": .optional(.text(min: 0, max: 500, multiline: true)),
    ])
    public let reason: String
    public let note: String?
}

/// An operator's decision on a report: take the thing down everywhere it shows, or dismiss the report.
public struct DecisionBody: RequestBody {
    public static let schema = Schema.object(["action": .required(.oneOf(["take_down", "dismiss"]))])
    public let action: String
}

extension Router {
    /// The moderators' queue of a service's reports under `/v1/operator/{service}/reports`, for holders of
    /// `moderators` (without it the queue does not exist: 404): the open reports, the oldest first, and a decision on
    /// one. Taking down calls `takeDown` (remove the thing everywhere it shows and say so in an event), in the
    /// transaction that settles every open report of the thing; a report decided already is 409.
    public mutating func addModeration(_ service: String, what: String, moderators: SharedSecret, pool: Pool, reports: Reports,
                                       takeDown: @escaping @Sendable (Connection, ReportRecord) throws -> Void) {
        guard moderators.isEnabled else { return }
        let path = "/v1/operator/\(service)/reports"
        add("GET", path, summary: "Operator: the open reports, the oldest first (?limit=)",
            response: (200, ItemList<QueuedReportView>.shape), trusted: moderators) { request in
            let limit = try Page(request, maxLimit: 500, defaultLimit: 100).limit
            return .json(ItemList(try pool.withConnection { try reports.open($0, limit: limit) }.map(QueuedReportView.init)))
        }
        query("GET", path, [.limit(max: 500, default: 100)])
        add("POST", path + "/{id}", summary: "Operator: take the reported \(what) down everywhere, or dismiss the report",
            body: DecisionBody.self, response: (200, ReportView.shape), trusted: moderators) { request, body in
            let id = try Validate.pathID(request)
            return try pool.withTransaction { c in
                guard let report = try reports.report(c, id) else { throw HTTPError.notFound() }
                guard report.status == "open" else { throw HTTPError.conflict("This report was decided already.") }
                let takingDown = body.action == "take_down"
                if takingDown { try takeDown(c, report) }
                try reports.settle(c, report, takingDown ? "taken_down" : "dismissed")
                return .json(ReportView(try reports.report(c, id) ?? report))
            }
        }
    }
}
