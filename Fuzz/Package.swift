// swift-tools-version:6.2
// libFuzzer harnesses, kept out of the main package so its build is unaffected. Run with `scripts/fuzz-hrm`.
import PackageDescription

let package = Package(
    name: "hr-gateway-fuzz",
    dependencies: [.package(name: "hr-gateway", path: "..")],
    targets: [
        .target(name: "CFuzzerDriver"),
        .executableTarget(
            name: "FuzzHRM",
            dependencies: ["CFuzzerDriver", .product(name: "BLEHeartRate", package: "hr-gateway")],
            swiftSettings: [.treatAllWarnings(as: .error)]
        ),
    ]
)
