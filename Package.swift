// swift-tools-version: 6.0
import Foundation
import PackageDescription

// The commit baked into the binary (`desk_gateway_build_info{revision}`, `/readyz`, `--version`): `make build` and the
// image set DESK_GATEWAY_REVISION; only the CBuildInfo object sees it. Anything but [0-9A-Za-z.-] is dropped.
let revision = (ProcessInfo.processInfo.environment["DESK_GATEWAY_REVISION"] ?? "")
    .filter { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == ".") }

// Imports are internal unless marked, and a file sees the members only of modules it imports itself: before, one file's
// `import Foundation` made `contains("_")` in every other file of its module Foundation's substring search.
let strict: [SwiftSetting] = [.enableUpcomingFeature("InternalImportsByDefault"), .enableUpcomingFeature("MemberImportVisibility")]

let package = Package(
    name: "desk-gateway",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "desk-gateway", targets: ["desk-gateway"]),
        .executable(name: "desk-emulator", targets: ["desk-emulator"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
    ],
    targets: [
        // C is fenced into these system-library targets (and CMicroHTTPDFixes); only HTTPServer, Postgres and CurlHTTP import them,
        // and only those and System call the C library.
        .systemLibrary(name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        // libcurl's easy API for link previews: a write callback that can stop a transfer, and pinned addresses.
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),

        // Work-arounds for libmicrohttpd 0.9.75 that must sit in front of its own exported functions (see lookup.c).
        .target(name: "CMicroHTTPDFixes", dependencies: ["CMicroHTTPD"]),
        .target(name: "HTTPServer", dependencies: ["CMicroHTTPD", "CMicroHTTPDFixes", "System"], swiftSettings: strict),
        .target(name: "Postgres", dependencies: ["CLibPQ", "System"], swiftSettings: strict),
        .target(name: "JSON", swiftSettings: strict),
        .target(name: "Domain", dependencies: ["JSON"], swiftSettings: strict),
        .target(name: "Reports", dependencies: ["JSON"], swiftSettings: strict),
        // The few C library calls the program needs (processes, file syncing, addresses), with errno as typed errors.
        .target(name: "System", swiftSettings: strict),
        .target(name: "CurlHTTP", dependencies: ["CCurl", "System"], swiftSettings: strict),
        .target(name: "DeskClient", dependencies: ["Domain", "JSON", "CurlHTTP"], swiftSettings: strict),
        .target(name: "DeskEmulator", dependencies: ["HTTPServer", "JSON", "Domain", "CurlHTTP", "System",
                                                     .product(name: "Crypto", package: "swift-crypto")], swiftSettings: strict),
        .executableTarget(name: "desk-emulator", dependencies: [
            "DeskEmulator", "System", .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ], swiftSettings: strict),
        .target(name: "Services", dependencies: ["Domain", "Reports", "JSON", .product(name: "Logging", package: "swift-log")], swiftSettings: strict),
        .target(name: "CBuildInfo", cSettings: revision.isEmpty ? [] : [.define("DG_REVISION", to: "\"\(revision)\"")]),
        .target(name: "Telemetry", dependencies: ["CBuildInfo", "JSON", "Domain", "CurlHTTP", "System", .product(name: "Logging", package: "swift-log")], swiftSettings: strict),
        .target(name: "Store", dependencies: ["Postgres", "System", "JSON", "Domain", "Reports", .product(name: "Crypto", package: "swift-crypto")],
                swiftSettings: strict),
        .target(name: "API", dependencies: ["CurlHTTP", "System", "Services", "Reports", .product(name: "Crypto", package: "swift-crypto"), "HTTPServer", "Telemetry", "JSON", "Domain",
                                            .product(name: "Logging", package: "swift-log")], swiftSettings: strict),
        .target(name: "GatewayApp", dependencies: ["API", "Services", "Store", "HTTPServer", "Telemetry", "DeskClient", "DeskEmulator", "Domain", "System",
                                                   .product(name: "Logging", package: "swift-log")], swiftSettings: strict),
        .executableTarget(name: "desk-gateway", dependencies: [
            "GatewayApp", "Telemetry", "Domain", "Services", "System",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
        ], swiftSettings: strict),

        // libFuzzer drivers for the parsers of untrusted input (`make fuzz`); a plain build replays files instead.
        .executableTarget(name: "dg-fuzz", dependencies: ["API", "Domain", "JSON", "Reports", "HTTPServer"], swiftSettings: strict),

        .target(name: "TestSupport", dependencies: ["GatewayApp", "Postgres", "Store", "HTTPServer", "DeskClient", "DeskEmulator"], path: "Tests/TestSupport"),
        // Routes and middleware on in-memory fakes: no PostgreSQL, no socket.
        .testTarget(name: "APITests", dependencies: ["API", "Domain", "Reports", "JSON", "HTTPServer", "Telemetry",
                                                    .product(name: "Logging", package: "swift-log")]),
        // The emulator's world model (Desk's ticket rules) without HTTP.
        .testTarget(name: "DeskEmulatorTests", dependencies: ["DeskEmulator", "Domain", "JSON"]),
        .testTarget(name: "HTTPServerTests", dependencies: ["HTTPServer", "System", "TestSupport"]),
        .testTarget(name: "ServicesTests", dependencies: ["Services", "Domain", "JSON", .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "ReportsTests", dependencies: ["Reports", "JSON", "Domain"]),
        .testTarget(name: "PostgresTests", dependencies: ["Postgres", "TestSupport"]),
        .testTarget(name: "StoreTests", dependencies: ["Store", "Postgres", "Domain", "Reports", "TestSupport"]),
        .testTarget(name: "DeskContractTests", dependencies: ["DeskClient", "CurlHTTP", "DeskEmulator", "Domain", "JSON", "HTTPServer", "TestSupport",
                                                             .product(name: "Crypto", package: "swift-crypto")]),
        .testTarget(name: "GatewayTests", dependencies: ["GatewayApp", "API", "Postgres", "DeskEmulator", "DeskClient", "Domain", "JSON", "TestSupport",
                                                        "Store", "Reports", "HTTPServer", "Telemetry",
                                                        .product(name: "Crypto", package: "swift-crypto")]),
    ]
)
