import Foundation

/// BlurHash (https://blurha.sh, the reference encoder's algorithm): a few cosine components of an image in a short
/// string, which a client decodes into a blurred preview while the image loads.
enum BlurHash {
    static let characters = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz#$%*+,-.:;=?@[]^_{|}~")

    /// The hash of `width` × `height` pixels, 3 bytes each (sRGB), with `x` × `y` components.
    static func encode(rgb: [UInt8], width: Int, height: Int, x: Int = 4, y: Int = 3) -> String {
        precondition(rgb.count >= width * height * 3 && (1...9).contains(x) && (1...9).contains(y))
        let linear = rgb.map { toLinear($0) }
        var factors: [(Double, Double, Double)] = []
        for j in 0..<y {
            for i in 0..<x {
                var r = 0.0, g = 0.0, b = 0.0
                for py in 0..<height {
                    let cy = cos(Double.pi * Double(j) * Double(py) / Double(height))
                    for px in 0..<width {
                        let basis = cos(Double.pi * Double(i) * Double(px) / Double(width)) * cy
                        let o = (py * width + px) * 3
                        r += basis * linear[o]; g += basis * linear[o + 1]; b += basis * linear[o + 2]
                    }
                }
                let scale = (i == 0 && j == 0 ? 1.0 : 2.0) / Double(width * height)
                factors.append((r * scale, g * scale, b * scale))
            }
        }
        var hash = base83((x - 1) + (y - 1) * 9, length: 1)
        let ac = factors.dropFirst()
        var maximum = 1.0
        if ac.isEmpty {
            hash += base83(0, length: 1)
        } else {
            let actual = ac.map { max(abs($0.0), abs($0.1), abs($0.2)) }.max()!
            let quantised = Int(max(0, min(82, (actual * 166 - 0.5).rounded(.down))))
            maximum = Double(quantised + 1) / 166
            hash += base83(quantised, length: 1)
        }
        let dc = factors[0]
        hash += base83(toSRGB(dc.0) << 16 | toSRGB(dc.1) << 8 | toSRGB(dc.2), length: 4)
        for f in ac {
            func q(_ v: Double) -> Int {
                let s = v / maximum
                return Int(max(0, min(18, (copysign(pow(abs(s), 0.5), s) * 9 + 9.5).rounded(.down))))
            }
            hash += base83(q(f.0) * 19 * 19 + q(f.1) * 19 + q(f.2), length: 2)
        }
        return hash
    }

    static func toLinear(_ v: UInt8) -> Double {
        let c = Double(v) / 255
        return c <= 0.04045 ? c / 12.92 : pow((c + 0.055) / 1.055, 2.4)
    }

    static func toSRGB(_ v: Double) -> Int {
        let c = max(0, min(1, v))
        return c <= 0.0031308 ? Int(c * 12.92 * 255 + 0.5) : Int((1.055 * pow(c, 1 / 2.4) - 0.055) * 255 + 0.5)
    }

    static func base83(_ value: Int, length: Int) -> String {
        String((1...length).map { characters[(value / Int(pow(83, Double(length - $0)))) % 83] })
    }
}
