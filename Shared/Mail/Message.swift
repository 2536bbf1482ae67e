import Foundation

/// A mailbox: an address and, optionally, the name shown with it.
public struct MailAddress: Sendable, Equatable {
    public let name: String?
    public let address: String

    /// Throws `invalid` for what is not a plain `local@domain` (no spaces, brackets or line breaks: nothing that
    /// could end a header or an SMTP command).
    public init(_ address: String, name: String? = nil) throws {
        let parts = address.split(separator: "@", omittingEmptySubsequences: false)
        guard address.utf8.count <= 254, parts.count == 2, !parts[0].isEmpty, parts[1].contains("."),
              !address.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F || "<>()[],;:\\\"".unicodeScalars.contains($0) })
        else { throw MailError.invalid("not an e-mail address: \(address.prefix(80))") }
        guard name.map({ !$0.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F } && $0.count <= 100 }) ?? true else {
            throw MailError.invalid("a display name holds a control character or is too long")
        }
        self.address = address; self.name = name
    }

    /// As a header shows it: `"Name" <address>`, the name encoded (RFC 2047) when it is not plain ASCII.
    var header: String {
        guard let name, !name.isEmpty else { return "<\(address)>" }
        return "\(MailMessage.encodedWord(name, quoted: true)) <\(address)>"
    }
}

/// One message to one person: plain text, optionally an HTML alternative, and the headers a bulk sender owes its
/// recipients (a `Message-ID`; for mail people subscribed to, `List-Unsubscribe` with one-click unsubscribe, RFC 8058).
public struct MailMessage: Sendable {
    public var from: MailAddress
    /// Where bounces go (`MAIL FROM`): an address of the sender's domain that nobody answers from.
    public var envelopeFrom: String
    public var to: MailAddress
    public var subject: String
    public var text: String
    public var html: String?
    /// `<unique@sender-domain>`: the same message sent again keeps it, so that mail clients see one.
    public var messageId: String
    /// An `https` link that unsubscribes with a POST (RFC 8058), or nil for mail a person asked for once (a reset).
    public var unsubscribe: String?
    public var date: Date

    public init(from: MailAddress, envelopeFrom: String? = nil, to: MailAddress, subject: String, text: String, html: String? = nil,
                messageId: String, unsubscribe: String? = nil, date: Date = Date()) {
        self.from = from; self.envelopeFrom = envelopeFrom ?? from.address; self.to = to; self.subject = subject; self.text = text
        self.html = html; self.messageId = messageId; self.unsubscribe = unsubscribe; self.date = date
    }

    /// The message as RFC 5322 bytes, lines ended with CRLF, bodies in base64 (any UTF-8, any line length).
    public func rendered() throws -> [UInt8] {
        for (name, value) in [("subject", subject), ("message id", messageId), ("unsubscribe link", unsubscribe ?? ""),
                              ("envelope sender", envelopeFrom)] {
            guard !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }), value.utf8.count <= 998 else {
                throw MailError.invalid("the \(name) holds a control character or is too long")
            }
        }
        guard messageId.hasPrefix("<"), messageId.hasSuffix(">"), messageId.contains("@") else {
            throw MailError.invalid("a Message-ID is <unique@domain>")
        }
        _ = try MailAddress(envelopeFrom)
        var headers = [
            "Date: \(Self.date(date))", "From: \(from.header)", "To: \(to.header)", "Subject: \(Self.encodedWord(subject, quoted: false))",
            "Message-ID: \(messageId)", "MIME-Version: 1.0",
        ]
        if let unsubscribe {
            headers += ["List-Unsubscribe: <\(unsubscribe)>", "List-Unsubscribe-Post: List-Unsubscribe=One-Click"]
        }
        var lines: [String]
        if let html {
            let boundary = "=_" + UUID().uuidString
            lines = headers + ["Content-Type: multipart/alternative; boundary=\"\(boundary)\"", "",
                               "--\(boundary)"] + Self.part(text, "text/plain") + ["--\(boundary)"] + Self.part(html, "text/html")
                + ["--\(boundary)--", ""]
        } else {
            lines = headers + Self.part(text, "text/plain")
        }
        return Array(lines.joined(separator: "\r\n").utf8)
    }

    /// A body part's headers and its base64 body, in lines of 76.
    static func part(_ body: String, _ type: String) -> [String] {
        let encoded = Data(body.utf8).base64EncodedString(options: [.lineLength76Characters, .endLineWithCarriageReturn, .endLineWithLineFeed])
        return ["Content-Type: \(type); charset=utf-8", "Content-Transfer-Encoding: base64", ""]
            + encoded.components(separatedBy: "\r\n") + [""]
    }

    /// A header value: as it is when plain ASCII (a display name quoted), else an RFC 2047 encoded word.
    static func encodedWord(_ value: String, quoted: Bool) -> String {
        if value.unicodeScalars.allSatisfy({ $0.isASCII }) {
            return quoted ? "\"" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\"" : value
        }
        return "=?UTF-8?B?" + Data(value.utf8).base64EncodedString() + "?="
    }

    /// RFC 5322's date: `Tue, 01 Dec 2026 09:30:00 +0000`.
    static func date(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss '+0000'"
        return formatter.string(from: date)
    }
}
