import Foundation
import HTTP
import Models
import Web

struct ReceiptLineView: View {
    let line: ReceiptLine
    static let fields: [ViewField<Self>] = [.field("description", \.line.description), .field("amountMinor", \.line.amountMinor)]
}

/// A receipt: what was paid (`totalMinor`, tax included), its net and tax parts at `taxRateBasisPoints`, and its lines.
struct ReceiptView: View {
    let receipt: ReceiptRecord
    var lines: [ReceiptLineView] { receipt.lines.map(ReceiptLineView.init) }
    static let fields: [ViewField<Self>] = [
        .field("number", \.receipt.number), .field("paymentId", \.receipt.paymentId),
        .field("purpose", \.receipt.purpose, .oneOf(["parcel", "top_up", "plan"])), .omitted("parcelId", \.receipt.parcelId),
        .field("currency", \.receipt.currency), .field("totalMinor", \.receipt.totalMinor), .field("netMinor", \.receipt.netMinor),
        .field("taxMinor", \.receipt.taxMinor), .field("taxRateBasisPoints", \.receipt.taxRateBasisPoints), .field("lines", \.lines),
        .field("issuedAt", \.receipt.issuedAt),
    ]
}

extension DispatchHandlers {
    /// `GET /v1/receipts?limit=`: the caller's receipts, the newest first.
    func listReceipts(_ context: Context<Caller>) throws -> Response {
        let limit = try Page(context.request, maxLimit: 100, defaultLimit: 20).limit
        return .json(ItemList(try pool.withConnection { try storage.receipts($0, payer: context.caller.userId, limit: limit) }.map(ReceiptView.init)))
    }

    /// `GET /v1/receipts/{number}`: one of the caller's receipts; anyone else's is not found.
    func getReceipt(_ context: Context<Caller>) throws -> Response {
        let number = try context.parameters.require("number")
        guard number.count <= 20, let receipt = try pool.withConnection({ try storage.receipt($0, number: number) }),
              receipt.payerId == context.caller.userId else { throw HTTPError.notFound("No such receipt.") }
        return .json(ReceiptView(receipt: receipt))
    }
}
