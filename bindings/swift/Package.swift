// swift-tools-version:5.9
// The Swift package of bleRPC for iOS: the blerpc-ffi library as an XCFramework (the binary
// target BlerpcFFI, made on a Mac by build-xcframework.sh), the Swift code UniFFI generates
// from it (Sources/Blerpc/Blerpc.swift, copied in by the same script, never committed) and the
// hand-written async layer (Sources/Blerpc/Blerpc+Async.swift). No Swift compiler runs where
// this repository is tested: see docs/bindings.md.
import PackageDescription

let package = Package(
    name: "Blerpc",
    platforms: [.iOS(.v16), .macOS(.v13)],
    products: [
        .library(name: "Blerpc", targets: ["Blerpc"]),
    ],
    targets: [
        // The static libraries (device, simulator) and the C header with its module map.
        .binaryTarget(name: "BlerpcFFI", path: "BlerpcFFI.xcframework"),
        .target(name: "Blerpc", dependencies: ["BlerpcFFI"], path: "Sources/Blerpc"),
    ]
)
