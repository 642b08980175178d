@testable import DeskClient
import Domain
import Foundation
import Testing

/// Desk's error answers are read as its other documents are: a broken emoji in the detail costs neither the state
/// code (a conflict read as an invalid value before) nor the detail the log gets.
@Suite struct DeskErrorAnswerTests {
    @Test func aBrokenStringInAnErrorAnswerKeepsItsCode() {
        let body = Data(#"{"code":"desk400200","detail":"ticket \ud83d closed \u0000"}"#.utf8)
        let error = DeskClient.mapClientError(400, headers: [:], data: body)
        #expect(error.code == .conflict)
        #expect(error.internalDetail == "desk400200: ticket \u{FFFD} closed \u{FFFD}")
        #expect(DeskClient.detail(body) == error.internalDetail)
        #expect(DeskClient.detail(Data("<html>".utf8)) == "(6 bytes, not JSON)")
    }
}
