import Foundation

/// Locates the folder holding `sql/` (migrations) and `openapi.yaml`: `ASSETS_DIR`, the working directory, the
/// repository root above a `.build/<config>/` binary, or an installed `share/desk-gateway`.
enum Assets {
    static func locate(configured: String?) throws -> String {
        if let configured {
            guard FileManager.default.fileExists(atPath: configured + "/sql") else {
                throw ConfigError(variable: "ASSETS_DIR", message: "'\(configured)' has no sql/ folder")
            }
            return configured
        }
        let executable = URL(fileURLWithPath: CommandLine.arguments.first ?? ".").resolvingSymlinksInPath()
        var candidates = [FileManager.default.currentDirectoryPath]
        var folder = executable.deletingLastPathComponent()
        for _ in 0..<4 {
            candidates.append(folder.path)
            candidates.append(folder.appendingPathComponent("share/desk-gateway").path)
            folder = folder.deletingLastPathComponent()
        }
        candidates.append("/usr/share/desk-gateway")
        for candidate in candidates where FileManager.default.fileExists(atPath: candidate + "/sql/0001_create_core.sql") {
            return candidate
        }
        throw ConfigError(variable: "ASSETS_DIR", message: "cannot find the sql/ migrations folder; set ASSETS_DIR to the folder holding sql/ and openapi.yaml")
    }
}
