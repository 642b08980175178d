import DeskGatewayClient
import Foundation

// The example in clients/swift/README.md, line for line (scripts/check_doc_examples.py holds the two to each other):
// built with the tests so the README cannot drift from the API; never called.
func readmeExample(sendbirdUserId: String, sendbirdAccessToken: String, csatMessageId: Int,
                   reauthenticate: @escaping @Sendable () async throws -> String) async throws {
    let desk = DeskGateway(baseURL: URL(string: "https://gateway.example.com")!) { _ in
        // The session ended: sign in again with the Sendbird token kept in the Keychain (nil: let the 401 through).
        try? await reauthenticate()
    }
    try await desk.authenticate(userId: sendbirdUserId, accessToken: sendbirdAccessToken)
    let ticket = try await desk.tickets.create(title: "My parcel never arrived", userName: "Ann")
    for try await open in desk.tickets.openedList() { print(open.title) }
    switch try await desk.tickets.submitFeedback(ticket.id, messageId: csatMessageId, score: 5, comment: "Thanks") {
    case .done(let rated): print(rated.satisfaction?.score ?? 0)
    case .queued(let operation): _ = try await desk.waitForOperation(operation)   // Desk was unreachable: queued
    }
}
