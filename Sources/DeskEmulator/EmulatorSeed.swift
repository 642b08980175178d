import Foundation
import JSON

public struct EmulatorSeedError: Error, CustomStringConvertible {
    public let description: String
}

/// Deterministic start data: `{teams:[{key,name}], agents:[{displayName,sendbirdId,teamKeys}],
/// customers:[{sendbirdId,accessToken,displayName}], ticketCustomFieldKeys:[…], customerCustomFieldKeys:[…],
/// settings:{autoCloseOnConfirm}}`. Ids are handed out in file order, so the same file gives the same ids.
extension DeskEmulator {
    public func seed(fromFile path: String) throws {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw EmulatorSeedError(description: "cannot read seed file \(path)")
        }
        try seed(json: [UInt8](data))
    }

    public func seed(json bytes: [UInt8]) throws {
        let document: JSONValue
        do { document = try JSONParser.parse(bytes) } catch { throw EmulatorSeedError(description: "seed is not valid JSON: \(error)") }
        do {
            try world.withLock { world throws(EmulatorFailure) in
                for team in document["teams"]?.arrayValue ?? [] {
                    guard let key = team["key"]?.stringValue else { throw EmulatorFailure.invalid("every team needs a key") }
                    _ = try Self.addTeam(&world, key: key, name: team["name"]?.stringValue ?? key,
                                         description: team["description"]?.stringValue ?? "")
                }
                for agent in document["agents"]?.arrayValue ?? [] {
                    guard let name = agent["displayName"]?.stringValue, let id = agent["sendbirdId"]?.stringValue else {
                        throw EmulatorFailure.invalid("every agent needs displayName and sendbirdId")
                    }
                    _ = try Self.addAgent(&world, displayName: name, sendbirdId: id,
                                          teamKeys: agent["teamKeys"]?.arrayValue?.compactMap(\.stringValue) ?? [],
                                          email: agent["email"]?.stringValue)
                }
                for customer in document["customers"]?.arrayValue ?? [] {
                    guard let id = customer["sendbirdId"]?.stringValue else { throw EmulatorFailure.invalid("every customer needs sendbirdId") }
                    _ = try Self.addCustomer(&world, sendbirdId: id, accessToken: customer["accessToken"]?.stringValue ?? "",
                                             displayName: customer["displayName"]?.stringValue ?? id)
                }
                if let keys = document["ticketCustomFieldKeys"]?.arrayValue { world.ticketFieldKeys.formUnion(keys.compactMap(\.stringValue)) }
                if let keys = document["customerCustomFieldKeys"]?.arrayValue { world.customerFieldKeys.formUnion(keys.compactMap(\.stringValue)) }
                if let value = document["settings"]?["autoCloseOnConfirm"]?.boolValue { world.autoCloseOnConfirm = value }
            }
        } catch {
            throw EmulatorSeedError(description: "seed rejected: \(error.detail)")
        }
    }

    /// The demo data the embedded emulator starts with (documented in docs/desk.md).
    public static let demoSeed = """
        {
          "teams": [
            {"key": "support", "name": "Customer Support"},
            {"key": "billing", "name": "Billing"}
          ],
          "agents": [
            {"displayName": "Ada Agent", "sendbirdId": "agent-ada", "teamKeys": ["support"]},
            {"displayName": "Bob Agent", "sendbirdId": "agent-bob", "teamKeys": ["support"]},
            {"displayName": "Cleo Agent", "sendbirdId": "agent-cleo", "teamKeys": ["billing"]},
            {"displayName": "Dan Agent", "sendbirdId": "agent-dan", "teamKeys": ["billing", "support"]}
          ],
          "customers": [
            {"sendbirdId": "demo-customer", "accessToken": "demo-token", "displayName": "Demo Customer"},
            {"sendbirdId": "demo-customer-2", "accessToken": "demo-token-2", "displayName": "Second Customer"}
          ]
        }
        """
}
