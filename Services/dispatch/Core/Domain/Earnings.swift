/// What a courier earns of a parcel they delivered: a share of its price (`COURIER_SHARE_PERCENT`, default 75),
/// rounded down to the minor unit, so that the courier is never promised more than the sum captured.
public struct EarningsRule: Sendable, Equatable {
    public let sharePercent: Int

    public init(sharePercent: Int) { self.sharePercent = sharePercent }

    public func courierShare(ofMinor price: Int) -> Int { max(0, price) * sharePercent / 100 }
}
