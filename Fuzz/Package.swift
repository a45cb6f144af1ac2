// swift-tools-version:6.2
// libFuzzer harnesses, kept out of the main package so its build is unaffected. Run with `scripts/fuzz-hrm` and
// `scripts/fuzz-pmd`.
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
        .executableTarget(
            name: "FuzzPMD",
            dependencies: ["CFuzzerDriver", .product(name: "PolarPMD", package: "hr-gateway")],
            swiftSettings: [.treatAllWarnings(as: .error)]
        ),
    ]
)
