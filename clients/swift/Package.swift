// swift-tools-version: 6.0
import PackageDescription

// A Swift client of desk-gateway for iOS and macOS apps (and Linux): types and calls generated from the gateway's
// openapi.yaml by Apple's swift-openapi-generator at build time, under a small façade that reads like the Desk SDK.
// It depends on nothing of the server's.
let package = Package(
    name: "DeskGatewayClient",
    platforms: [.iOS(.v15), .macOS(.v12), .tvOS(.v15), .watchOS(.v8)],
    products: [
        .library(name: "DeskGatewayClient", targets: ["DeskGatewayClient"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-openapi-generator", from: "1.14.3"),
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4"),
        .package(url: "https://github.com/apple/swift-openapi-urlsession", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
    ],
    targets: [
        .target(
            name: "DeskGatewayClient",
            dependencies: [
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIURLSession", package: "swift-openapi-urlsession"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            plugins: [.plugin(name: "OpenAPIGenerator", package: "swift-openapi-generator")]
        ),
        .testTarget(name: "DeskGatewayClientTests", dependencies: ["DeskGatewayClient"]),
    ]
)
