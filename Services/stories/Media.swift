import Crypto

/// What the bytes of an upload say they are: the type comes from the content, never from the header.
struct ImageInfo: Equatable {
    let contentType: String
    let width: Int?
    let height: Int?

    /// Recognises JPEG, PNG, WebP and HEIC; nil for anything else.
    static func sniff(_ b: [UInt8]) -> ImageInfo? {
        func be16(_ i: Int) -> Int { Int(b[i]) << 8 | Int(b[i + 1]) }
        func be32(_ i: Int) -> Int { be16(i) << 16 | be16(i + 2) }
        func le16(_ i: Int) -> Int { Int(b[i]) | Int(b[i + 1]) << 8 }
        func le24(_ i: Int) -> Int { le16(i) | Int(b[i + 2]) << 16 }
        func ascii(_ i: Int, _ s: String) -> Bool { i + s.utf8.count <= b.count && Array(b[i..<(i + s.utf8.count)]) == Array(s.utf8) }

        if b.count >= 24, b[0..<8] == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], ascii(12, "IHDR") {
            return ImageInfo(contentType: "image/png", width: be32(16), height: be32(20))
        }
        if b.count >= 4, b[0] == 0xFF, b[1] == 0xD8, b[2] == 0xFF {
            // Walk the segments to the first start-of-frame for the dimensions.
            var i = 2
            while i + 9 < b.count, b[i] == 0xFF {
                let marker = b[i + 1]
                if (0xC0...0xCF).contains(marker) && ![0xC4, 0xC8, 0xCC].contains(marker) {
                    return ImageInfo(contentType: "image/jpeg", width: be16(i + 7), height: be16(i + 5))
                }
                if marker == 0xD8 || marker == 0x01 || (0xD0...0xD7).contains(marker) { i += 2; continue }
                i += 2 + be16(i + 2)
            }
            return ImageInfo(contentType: "image/jpeg", width: nil, height: nil)
        }
        if b.count >= 30, ascii(0, "RIFF"), ascii(8, "WEBP") {
            if ascii(12, "VP8X") { return ImageInfo(contentType: "image/webp", width: le24(24) + 1, height: le24(27) + 1) }
            if ascii(12, "VP8 "), b[23] == 0x9D, b[24] == 0x01, b[25] == 0x2A {
                return ImageInfo(contentType: "image/webp", width: le16(26) & 0x3FFF, height: le16(28) & 0x3FFF)
            }
            if ascii(12, "VP8L"), b[20] == 0x2F {
                let bits = Int(b[21]) | Int(b[22]) << 8 | Int(b[23]) << 16 | Int(b[24]) << 24
                return ImageInfo(contentType: "image/webp", width: (bits & 0x3FFF) + 1, height: ((bits >> 14) & 0x3FFF) + 1)
            }
            return nil
        }
        if b.count >= 12, ascii(4, "ftyp"), ["heic", "heix", "heim", "heis", "hevc", "hevx", "mif1", "msf1"].contains(where: { ascii(8, $0) }) {
            return ImageInfo(contentType: "image/heic", width: nil, height: nil)
        }
        return nil
    }
}

/// Invite codes: 12 Crockford base32 symbols (60 random bits), shown as `XXXX-XXXX-XXXX` to be read aloud.
/// Entry is forgiving: case, dashes and spaces are ignored, and O, I and L read as 0, 1 and 1.
enum InviteCode {
    static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ")

    /// A fresh code in its stored (normalised) form.
    static func generate() -> String {
        String(secureRandomBytes(12).map { alphabet[Int($0 & 31)] })
    }

    /// The stored form of what someone typed, or nil when it cannot be a code.
    static func normalise(_ typed: String) -> String? {
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
    static func display(_ stored: String) -> String {
        let c = Array(stored)
        guard c.count == 12 else { return stored }
        return String(c[0..<4]) + "-" + String(c[4..<8]) + "-" + String(c[8..<12])
    }
}
