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
}
