import Crypto

/// Invite codes: 12 Crockford base32 symbols (60 random bits), shown as `XXXX-XXXX-XXXX` to be read aloud.
/// Entry is forgiving: case, dashes and spaces are ignored, and O, I and L read as 0, 1 and 1. Stories' groups and
/// chat's rooms use them.
public enum InviteCode {
    static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ")

    /// A fresh code in its stored (normalised) form.
    public static func generate() -> String {
        String(secureRandomBytes(12).map { alphabet[Int($0 & 31)] })
    }

    /// The stored form of what someone typed, or nil when it cannot be a code.
    public static func normalise(_ typed: String) -> String? {
        var out = ""
        for c in typed.uppercased() {
            switch c {
            case "-", " ": continue
            case "O": out.append("0")
            case "I", "L": out.append("1")
            default:
                guard alphabet.contains(c) else { return nil }
                out.append(c)
            }
        }
        return out.count == 12 ? out : nil
    }

    /// The display form.
    public static func display(_ stored: String) -> String {
        let c = Array(stored)
        guard c.count == 12 else { return stored }
        return String(c[0..<4]) + "-" + String(c[4..<8]) + "-" + String(c[8..<12])
    }
}
