import API
import Foundation
import Testing
import TestSupport

/// The problem table and openapi.yaml's list of codes are the same set, and each code's status is documented.
@Suite struct ProblemTableTests {
    @Test func theTableAndTheContractListTheSameCodes() throws {
        let document = try String(contentsOfFile: TestPostgres.repositoryRoot + "/openapi.yaml", encoding: .utf8)
        let start = try #require(document.range(of: "enum: [malformed_json"))
        let end = try #require(document[start.upperBound...].firstIndex(of: "]"))
        let listed = document[document.index(start.lowerBound, offsetBy: 7)..<end]
            .split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\n" || $0 == "[" }).map(String.init).filter { !$0.isEmpty }
        #expect(Set(listed) == Set(Problem.allCases.map(\.rawValue)), "\(Set(listed).symmetricDifference(Problem.allCases.map(\.rawValue)))")
        #expect(listed.count == Problem.allCases.count)
        // The prose list in the same schema names each code with its status (lines folded).
        let prose = document.split(whereSeparator: { $0 == " " || $0 == "\n" }).joined(separator: " ")
        for problem in Problem.allCases {
            #expect(prose.contains("`\(problem.rawValue)` (\(problem.status)"), "\(problem.rawValue) \(problem.status)")
            #expect((400...599).contains(problem.status) && !problem.title.isEmpty)
        }
    }
}
