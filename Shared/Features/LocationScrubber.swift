/// Removes where a photo was taken before it is stored: the GPS block of a JPEG's Exif data is blanked, XMP
/// packets (which may repeat it) and PNG text and Exif chunks are dropped. Orientation and colour data stay,
/// so photos still display the right way up. WebP and HEIC are stored as uploaded (see the README).
public enum LocationScrubber {
    /// The image without its location data; other types come back unchanged.
    public static func scrub(_ bytes: [UInt8], contentType: String) -> [UInt8] {
        switch contentType {
        case "image/jpeg": return jpeg(bytes)
        case "image/png": return png(bytes)
        default: return bytes
        }
    }

    // MARK: JPEG

    static func jpeg(_ b: [UInt8]) -> [UInt8] {
        var out = Array(b.prefix(2))
        var i = 2
        while i + 4 <= b.count, b[i] == 0xFF {
            let marker = b[i + 1]
            if marker == 0xDA || marker == 0xD9 { break }  // start of scan: the rest is image data
            let length = Int(b[i + 2]) << 8 | Int(b[i + 3])
            guard length >= 2, i + 2 + length <= b.count else { break }
            var segment = Array(b[i..<(i + 2 + length)])
            if marker == 0xE1 {
                let payload = segment[4...]
                if payload.starts(with: Array("Exif\0\0".utf8)) {
                    blankGPS(&segment, tiffStart: 10)
                } else if payload.starts(with: Array("http://ns.adobe.com/xap/1.0/".utf8)) {
                    i += 2 + length
                    continue  // XMP: dropped
                }
            }
            out += segment
            i += 2 + length
        }
        out += b[min(i, b.count)...]
        return out
    }

    /// Blanks the GPS IFD of the TIFF structure starting at `tiffStart` in `s`: its entries, their values, and
    /// its entry count, so no reader finds a trace of the location.
    static func blankGPS(_ s: inout [UInt8], tiffStart t: Int) {
        guard s.count >= t + 8 else { return }
        let little = s[t] == 0x49 && s[t + 1] == 0x49
        guard little || (s[t] == 0x4D && s[t + 1] == 0x4D) else { return }
        func u16(_ o: Int) -> Int? {
            guard o >= 0, o + 2 <= s.count else { return nil }
            return little ? Int(s[o]) | Int(s[o + 1]) << 8 : Int(s[o]) << 8 | Int(s[o + 1])
        }
        func u32(_ o: Int) -> Int? {
            guard let a = u16(o), let b = u16(o + 2) else { return nil }
            return little ? a | b << 16 : a << 16 | b
        }
        func zero(_ from: Int, _ count: Int) {
            guard from >= 0, count > 0, from + count <= s.count else { return }
            for k in from..<(from + count) { s[k] = 0 }
        }
        guard let ifd0 = u32(t + 4).map({ t + $0 }), let entries = u16(ifd0) else { return }
        for e in 0..<min(entries, 512) {
            let entry = ifd0 + 2 + e * 12
            guard u16(entry) == 0x8825, let offset = u32(entry + 8), let count = u16(t + offset) else { continue }
            let gps = t + offset
            let sizes = [1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 7: 1, 9: 4, 10: 8]
            for g in 0..<min(count, 512) {
                let ge = gps + 2 + g * 12
                guard let type = u16(ge + 2), let n = u32(ge + 4) else { continue }
                let size = (sizes[type] ?? 1) * n
                if size > 4, let valueOffset = u32(ge + 8) { zero(t + valueOffset, min(size, s.count)) }
                zero(ge, 12)
            }
            zero(gps, 2)
        }
    }

    // MARK: PNG

    static func png(_ b: [UInt8]) -> [UInt8] {
        guard b.count > 8 else { return b }
        var out = Array(b.prefix(8))
        var i = 8
        let dropped: Set<String> = ["eXIf", "tEXt", "zTXt", "iTXt"]
        while i + 12 <= b.count {
            let length = Int(b[i]) << 24 | Int(b[i + 1]) << 16 | Int(b[i + 2]) << 8 | Int(b[i + 3])
            guard length >= 0, i + 12 + length <= b.count else { break }
            let type = String(decoding: b[(i + 4)..<(i + 8)], as: UTF8.self)
            if !dropped.contains(type) { out += b[i..<(i + 12 + length)] }
            i += 12 + length
        }
        out += b[min(i, b.count)...]
        return out
    }
}
