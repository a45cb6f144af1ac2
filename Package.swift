// swift-tools-version:6.2
import PackageDescription

/// Our own targets build with every warning as an error; dependencies are left alone.
let strict: [SwiftSetting] = [.treatAllWarnings(as: .error)]

let package = Package(
    name: "hr-gateway",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "hr-gateway", targets: ["hr-gateway"]),
        .executable(name: "hr-gateway-bench", targets: ["hr-gateway-bench"]),
        .library(name: "GatewayEngine", targets: ["GatewayEngine"]),
        .library(name: "HRVAnalysis", targets: ["HRVAnalysis"]),
        .library(name: "DBus", targets: ["DBus"]),
        .library(name: "BlueZ", targets: ["BlueZ"]),
        .library(name: "BLEHeartRate", targets: ["BLEHeartRate"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        // MARK: Engine (portable: no Linux-only imports)
        .target(name: "HRVAnalysis", swiftSettings: strict),
        .target(name: "GatewayEngine", dependencies: ["HRVAnalysis"], swiftSettings: strict),

        // MARK: Providers
        .target(name: "SimulatedProvider", dependencies: ["GatewayEngine"], swiftSettings: strict),
        .target(name: "ReplayProvider", dependencies: ["GatewayEngine"], swiftSettings: strict),

        // MARK: Sinks
        .target(name: "StdoutSink", dependencies: ["GatewayEngine"], swiftSettings: strict),

        // MARK: D-Bus and BlueZ (Linux, libdbus-1)
        .systemLibrary(name: "CDBus", pkgConfig: "dbus-1", providers: [.apt(["libdbus-1-dev"])]),
        .target(
            name: "DBus",
            dependencies: ["CDBus", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),
        .target(name: "DBusTestSupport", dependencies: ["DBus"], swiftSettings: strict),
        .target(
            name: "BlueZ",
            dependencies: ["DBus", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),

        .target(
            name: "BLEHeartRate",
            dependencies: ["GatewayEngine", "DBus", "BlueZ", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),

        // MARK: Command line
        .executableTarget(
            name: "hr-gateway",
            dependencies: [
                "GatewayEngine", "HRVAnalysis", "SimulatedProvider", "ReplayProvider", "StdoutSink",
                "BLEHeartRate", "BlueZ", "DBus",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "hr-gateway-bench",
            dependencies: ["GatewayEngine", "HRVAnalysis", "DBus", "DBusTestSupport"],
            swiftSettings: strict
        ),

        // MARK: Tests
        .testTarget(name: "HRVAnalysisTests", dependencies: ["HRVAnalysis"], resources: [.copy("Data")], swiftSettings: strict),
        .testTarget(
            name: "GatewayEngineTests",
            dependencies: ["GatewayEngine", "SimulatedProvider", "ReplayProvider"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "BLEHeartRateTests",
            dependencies: ["BLEHeartRate", "GatewayEngine", "DBus", "DBusTestSupport"],
            resources: [.copy("Data")],
            swiftSettings: strict
        ),
        .testTarget(name: "CLITests", dependencies: ["hr-gateway"], swiftSettings: strict),
        .testTarget(
            name: "DBusTests", dependencies: ["DBus", "DBusTestSupport"], resources: [.copy("Data")], swiftSettings: strict
        ),
        .testTarget(name: "BlueZTests", dependencies: ["BlueZ", "DBus", "DBusTestSupport"], swiftSettings: strict),
    ]
)
