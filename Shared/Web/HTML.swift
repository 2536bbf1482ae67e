import HTTP

/// Text put into an HTML page or mail: escaped, so that what a person wrote is shown, never run.
public enum HTML {
    /// `s` with `& < > " '` escaped; with `lineBreaks`, each newline becomes `<br>`.
    public static func escape(_ s: String, lineBreaks: Bool = false) -> String {
        var out = ""
        out.reserveCapacity(s.utf8.count)
        for ch in s.unicodeScalars {
            switch ch {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            case "\n" where lineBreaks: out += "<br>"
            default: out.unicodeScalars.append(ch)
            }
        }
        return out
    }

    /// A small page for a person who followed a link from a mail (`body` is HTML): not cached, and opened links
    /// carry no referrer (the page's own URL holds a token).
    public static func page(_ title: String, _ body: String) -> Response {
        var response = Response.text("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\">"
            + "<title>\(title)</title></head><body style=\"font-family:sans-serif;max-width:32em;margin:4em auto\"><h1>\(title)</h1>\(body)</body></html>",
            contentType: "text/html; charset=utf-8")
        response.headers.append(("Cache-Control", "no-store"))
        response.headers.append(("Referrer-Policy", "no-referrer"))
        return response
    }
}
