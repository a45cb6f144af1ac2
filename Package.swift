// swift-tools-version:6.2
import PackageDescription

/// Our own targets build with every warning as an error; dependencies are left alone.
let strict: [SwiftSetting] = [.treatAllWarnings(as: .error)]

// Linux only: BlueZ over D-Bus, V4L2, journald and the state directory's flock/sqlite layout are what the gateway is
// built on, and CI builds and tests on Linux alone. SwiftPM cannot say "Linux only", so no `platforms` minimum is
// declared: a macOS minimum would claim a platform nothing here is built or tested on. The targets marked portable
// (GatewayEngine, HRVAnalysis, RPPG) avoid Linux-only imports, but that is not a claim that they are supported on macOS.
let package = Package(
    name: "hr-gateway",
    products: [
        .executable(name: "hr-gateway", targets: ["hr-gateway"]),
        .executable(name: "hr-gateway-bench", targets: ["hr-gateway-bench"]),
        .library(name: "GatewayEngine", targets: ["GatewayEngine"]),
        .library(name: "HRVAnalysis", targets: ["HRVAnalysis"]),
        .library(name: "DBus", targets: ["DBus"]),
        .library(name: "BlueZ", targets: ["BlueZ"]),
        .library(name: "V4L2Capture", targets: ["V4L2Capture"]),
        .library(name: "RPPG", targets: ["RPPG"]),
        .library(name: "FaceDetection", targets: ["FaceDetection"]),
        // libHRGatewayOpenCV.so: the face detector's OpenCV side, loaded at run time by CFaceDetect (see below).
        // `swift build` and `swift build --build-tests` build it; with `--product hr-gateway`, build it too.
        .library(name: "HRGatewayOpenCV", type: .dynamic, targets: ["CFaceDetectOpenCV"]),
        .library(name: "BLEHeartRate", targets: ["BLEHeartRate"]),
        // Polar Measurement Data (ECG, accelerometer) protocol layer: pure encoding and decoding, no I/O.
        .library(name: "PolarPMD", targets: ["PolarPMD"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/LebJe/TOMLKit", from: "0.6.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", exact: "2.28.1", traits: []),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", exact: "2.8.1"),
        .package(url: "https://github.com/swift-server/swift-prometheus", exact: "2.4.1"),
        .package(url: "https://github.com/apple/swift-crypto", exact: "3.12.3"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        // The relay's self-signed certificate (X.509 in Swift on swift-crypto; needs swift-crypto 3.12.3 or later).
        .package(url: "https://github.com/apple/swift-certificates", exact: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1", exact: "1.7.4"),
        // NIO itself: the relay, metrics and webhook targets and the executable use its types directly (channels,
        // HTTP heads, TLS configuration), so they name it rather than reach it through Hummingbird.
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.3"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        // The webhook's HTTP client (on swift-nio, already here for the relay; Hummingbird's package requires it too).
        .package(url: "https://github.com/swift-server/async-http-client", exact: "1.37.0"),
    ],
    targets: [
        // MARK: Engine (portable: no Linux-only imports)
        .target(name: "HRVAnalysis", swiftSettings: strict),
        .target(
            name: "GatewayEngine",
            dependencies: ["HRVAnalysis", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),

        // MARK: rPPG (portable: pure Swift, no Foundation)
        .target(name: "RPPG", swiftSettings: strict),
        // Renders test and benchmark video; optimised even in debug builds so the tests stay fast.
        // Offline path shared by `analyze` and the accuracy harness: ffmpeg decoding, trace and video runs, the
        // contact-PPG reference; optimised even in debug builds so scripts/test's rppg-eval stays quick.
        .target(name: "RPPGAnalysis", dependencies: ["RPPG", "FaceDetection"], swiftSettings: strict + [.unsafeFlags(["-O"])]),
        .target(name: "RPPGSynthetic", dependencies: ["RPPG"], swiftSettings: strict + [.unsafeFlags(["-O"])]),

        // MARK: Face detection (OpenCV objdetect from libopencv-objdetect-dev; cascades from opencv-data)
        // Debian 12 ships no opencv4.pc without the whole libopencv-dev, so the include path and libraries are named.
        // CFaceDetect is the C API and a loader; the OpenCV code is CFaceDetectOpenCV, built as its own shared library
        // (the HRGatewayOpenCV product, beside the executables) and opened on first use, so that a process that
        // streams a strap never maps OpenCV and what it pulls in (about 10 MB resident).
        .target(name: "CFaceDetect", cSettings: [.define("_GNU_SOURCE")], linkerSettings: [.linkedLibrary("dl")]),
        .target(
            name: "CFaceDetectOpenCV",
            // include/CFaceDetect.h is a link to CFaceDetect's header: one declaration of the types for both sides.
            cxxSettings: [.unsafeFlags(["-I/usr/include/opencv4", "-fvisibility=hidden"])],
            linkerSettings: [
                .linkedLibrary("opencv_objdetect"), .linkedLibrary("opencv_imgproc"), .linkedLibrary("opencv_core"),
                .linkedLibrary("stdc++"),
                // No Swift here: without Swift's startup object, and against the static runtime archive (from which
                // nothing is then pulled in), the library needs no libswiftCore.so and no rpath into the toolchain,
                // so that it loads where the release binary (its Swift runtime static) runs without a toolchain.
                .unsafeFlags(["-nostartfiles", "-static-stdlib"]),
            ]
        ),
        .target(name: "FaceDetection", dependencies: ["CFaceDetect", "RPPG"], swiftSettings: strict),
        // liblsl (Lab Streaming Layer) through dlopen: not in Debian; pylsl's wheel carries it. A gateway without it
        // runs; `--lsl` says how to get it.
        .target(name: "CLSL", cSettings: [.define("_GNU_SOURCE")], linkerSettings: [.linkedLibrary("dl")]),

        // MARK: Providers
        .target(name: "SimulatedProvider", dependencies: ["GatewayEngine", "HRVAnalysis"], swiftSettings: strict),
        .target(
            name: "ReplayProvider",
            dependencies: ["GatewayEngine", "SystemCalls", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),

        // MARK: V4L2 capture (Linux; libv4l2 from libv4l-dev)
        .systemLibrary(name: "CLibV4L2", pkgConfig: "libv4l2", providers: [.apt(["libv4l-dev"])]),
        .target(
            name: "CV4L2",
            dependencies: ["CLibV4L2"],
            cSettings: [.define("_GNU_SOURCE")],
            // libv4l2.pc lists libv4lconvert only under Requires.private, so link it explicitly.
            linkerSettings: [.linkedLibrary("v4lconvert")]
        ),
        .target(name: "V4L2Capture", dependencies: ["CV4L2"], swiftSettings: strict),
        .target(name: "V4L2TestSupport", dependencies: ["V4L2Capture", "CV4L2"], swiftSettings: strict),

        // MARK: Camera provider (V4L2 capture into the rPPG estimator, as a session source)
        .target(
            name: "CameraProvider", dependencies: ["GatewayEngine", "V4L2Capture", "RPPG", "FaceDetection"],
            swiftSettings: strict
        ),

        // MARK: Sinks
        // The sink protocol, the fan-out and the session as a service (swift-service-lifecycle): what every sink
        // depends on, without the command line.
        .target(
            name: "GatewaySink",
            dependencies: ["GatewayEngine", .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")],
            swiftSettings: strict
        ),
        .target(name: "StdoutSink", dependencies: ["GatewayEngine", "GatewaySink", "HRVAnalysis", "SystemCalls"], swiftSettings: strict),
        // Lab Streaming Layer outlets: HR, RR and ECG per device (docs/lsl.md).
        .target(name: "LSLSink", dependencies: ["CLSL", "GatewayEngine", "GatewaySink", "SystemCalls"], swiftSettings: strict),

        // MARK: Relay, split like Hummingbird's package: logic, storage, server, client each in a target of its own.
        // The hub and consumer queues: numbering, resume, delivery classes, commands; no I/O.
        .target(name: "RelayCore", dependencies: ["GatewayEngine"], swiftSettings: strict),
        // What the relay keeps in the state directory: the reliable outbox (relay.sqlite) and the tokens (tokens.json).
        .target(
            name: "RelayStore",
            dependencies: [
                "RelayCore", "GatewayEngine", "GatewayStorage", "SystemCalls",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strict
        ),
        // The Hummingbird WebSocket server, the dashboard page and the (self-signed) TLS certificate.
        .target(
            name: "RelayWebServer",
            dependencies: [
                "RelayCore", "RelayStore", "GatewayEngine", "GatewayStorage", "SystemCalls",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // The dial-out side: the WebSocket client, certificate pinning, the uplink to a far relay (which carries its
        // frames with the server's pump, hence RelayWebServer).
        .target(
            name: "RelayWSClient",
            dependencies: [
                "RelayCore", "RelayWebServer", "GatewayEngine",
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),

        // MARK: D-Bus and BlueZ (Linux, libdbus-1)
        .systemLibrary(name: "CDBus", pkgConfig: "dbus-1", providers: [.apt(["libdbus-1-dev"])]),
        // The release binary links libdbus statically (Sources/hr-gateway/link/libdbus-1.so); this answers its two
        // calls into libsystemd, which only a D-Bus server makes.
        .target(name: "CDBusStatic"),
        .target(
            name: "DBus",
            dependencies: ["CDBus", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),
        .target(
            name: "DBusTestSupport",
            dependencies: ["DBus", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),
        .target(
            name: "BlueZ",
            dependencies: ["DBus", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),

        .target(
            name: "BLEHeartRate",
            dependencies: [
                "GatewayEngine", "HRVAnalysis", "DBus", "BlueZ", "PolarPMD", .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // Polar Measurement Data (PMD): control-point requests and responses, ECG/accelerometer data frames (raw and
        // delta-compressed), per-sample sensor times and the sensor-to-host clock mapping. Pure, no dependencies.
        .target(name: "PolarPMD", swiftSettings: strict),

        // MARK: State directory files (SQLite opened alike, lock files), shared by the stores
        .target(
            name: "GatewayStorage",
            dependencies: ["SystemCalls", .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: strict
        ),
        // The POSIX calls made in several targets, each once: EINTR retried, failures as values with their errno.
        .target(name: "SystemCalls", dependencies: ["CSystemCalls"], swiftSettings: strict),
        // Whether the system clock is synchronized (<sys/timex.h>: keep_days counts from today only then); standard
        // descriptors closed at start opened on /dev/null before anything else runs.
        .target(name: "CSystemCalls"),

        // MARK: Session store (SQLite through GRDB; libsqlite3-dev)
        .target(
            name: "SessionStore",
            dependencies: [
                "GatewayEngine", "GatewaySink", "GatewayStorage", "HRVAnalysis", "SystemCalls",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: strict
        ),

        // MARK: MQTT (libmosquitto from libmosquitto-dev): status, events, last will to a real broker
        // libmosquitto through dlopen (opened when `--mqtt` first needs it); mosquitto.h from libmosquitto-dev.
        .target(name: "CMosquitto", cSettings: [.define("_GNU_SOURCE")], linkerSettings: [.linkedLibrary("dl")]),
        .target(
            name: "MQTTSink",
            dependencies: [
                "CMosquitto", "GatewayEngine", "GatewaySink", "GatewayStorage", .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),

        // MARK: Prometheus metrics (swift-prometheus): a sink for what the session shows, collectors read when
        // scraped, and the --metrics-listen server; the relay serves the same text on its port.
        .target(
            name: "GatewayMetrics",
            dependencies: [
                "GatewayEngine", "GatewaySink",
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),

        // MARK: Webhook store-and-forward (durable outbox in the state directory, POST with retries)
        .target(
            name: "WebhookSink",
            dependencies: [
                "GatewayEngine", "GatewayStorage", .product(name: "GRDB", package: "GRDB.swift"),
                // Already in the graph (Hummingbird's own package uses it); on NIO, like the relay.
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                // SHA-256 of each body for its Idempotency-Key (already in the graph: the relay's certificate).
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strict
        ),

        .target(name: "WebhookTestSupport", swiftSettings: strict),
        .target(name: "StorageTestSupport", swiftSettings: strict),

        // MARK: Configuration file (TOML)
        .target(
            name: "GatewayConfig",
            dependencies: ["GatewayEngine", "SystemCalls", .product(name: "TOMLKit", package: "TOMLKit")],
            swiftSettings: strict
        ),

        // MARK: System checks (hr-gateway doctor; libbluetooth from libbluetooth-dev)
        .systemLibrary(name: "CBluetooth", pkgConfig: "bluez", providers: [.apt(["libbluetooth-dev"])]),
        .target(
            name: "GatewayDoctor", dependencies: ["CBluetooth", "DBus", "FaceDetection", "GatewayStorage"], swiftSettings: strict
        ),

        // MARK: Logging (terminal and journald)
        .target(
            name: "GatewayLogging", dependencies: ["SystemCalls", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),

        // MARK: Command line
        .executableTarget(
            name: "hr-gateway",
            dependencies: [
                "GatewayEngine", "HRVAnalysis", "SimulatedProvider", "ReplayProvider", "StdoutSink",
                "BLEHeartRate", "BlueZ", "DBus", "CDBusStatic", "V4L2Capture", "RPPG", "RPPGAnalysis", "FaceDetection",
                "CameraProvider",
                "SessionStore", "GatewayStorage", "SystemCalls", "GatewayConfig", "GatewayDoctor", "GatewayLogging", "RelayCore",
                "RelayStore", "RelayWebServer", "RelayWSClient", "WebhookSink", "GatewaySink", "MQTTSink", "GatewayMetrics",
                "LSLSink",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            exclude: ["link"],
            swiftSettings: strict,
            // Release links for a smaller resident set (docs/architecture.md, "Memory"), with the files in link/: lld
            // with packed relative relocations (DT_RELR: 144,000 relocations in 30 KB instead of 3.4 MB read at every
            // start; needs glibc 2.36, Debian 12), no exported symbols (exports.map), libstdc++ linked statically
            // (link/libstdc++.so, a linker script that -lstdc++ finds first), and the functions a strap session runs
            // placed side by side (hot-code.order, written by scripts/code-order; a name no longer in the build is
            // skipped).
            linkerSettings: [
                .unsafeFlags(
                    ["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
                     "-Xlinker", "--version-script=\(Context.packageDirectory)/Sources/hr-gateway/link/exports.map",
                     "-L", "\(Context.packageDirectory)/Sources/hr-gateway/link",
                     "-Xlinker", "--symbol-ordering-file=\(Context.packageDirectory)/Sources/hr-gateway/link/hot-code.order",
                     "-Xlinker", "--no-warn-symbol-ordering"],
                    .when(configuration: .release)),
            ]
        ),
        .executableTarget(
            name: "hr-gateway-bench",
            dependencies: [
                "GatewayEngine", "HRVAnalysis", "DBus", "DBusTestSupport", "RPPG", "RPPGAnalysis", "RPPGSynthetic", "FaceDetection", "BLEHeartRate", "V4L2Capture",
                "RelayCore", "RelayWebServer", "RelayWSClient", "MQTTSink", "GatewaySink", "SimulatedProvider",
                "WebhookTestSupport", "CDBusStatic",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict,
            // The strap bench's in-process consumer runs the shipped binary's strap path: in release, its functions
            // are placed side by side as in `hr-gateway` (hot-code.order), with libdbus and libstdc++ linked
            // statically as there (link/), so its latency is that of the layout users run.
            linkerSettings: [
                .unsafeFlags(
                    ["-use-ld=lld",
                     "-L", "\(Context.packageDirectory)/Sources/hr-gateway/link",
                     "-Xlinker", "--symbol-ordering-file=\(Context.packageDirectory)/Sources/hr-gateway/link/hot-code.order",
                     "-Xlinker", "--no-warn-symbol-ordering"],
                    .when(configuration: .release)),
            ]
        ),

        // MARK: Tests
        .testTarget(name: "HRVAnalysisTests", dependencies: ["HRVAnalysis"], resources: [.copy("Data")], swiftSettings: strict),
        .testTarget(
            name: "GatewayEngineTests",
            dependencies: [
                "GatewayEngine", "GatewaySink", "SimulatedProvider", "ReplayProvider", "StdoutSink",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "V4L2CaptureTests",
            dependencies: ["V4L2Capture", "V4L2TestSupport", "CV4L2"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "CamerasCommandTests",
            dependencies: ["hr-gateway", "V4L2Capture", "GatewayEngine"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "BLEHeartRateTests",
            dependencies: ["BLEHeartRate", "BlueZ", "GatewayEngine", "HRVAnalysis", "DBus", "DBusTestSupport", "PolarPMD", .product(name: "Logging", package: "swift-log")],
            resources: [.copy("Data")],
            swiftSettings: strict
        ),
        .testTarget(name: "PolarPMDTests", dependencies: ["PolarPMD"], exclude: ["Polar_SDK_License.txt"], swiftSettings: strict),
        .testTarget(name: "LSLSinkTests", dependencies: ["LSLSink"], swiftSettings: strict),
        .testTarget(
            name: "CLITests",
            dependencies: ["hr-gateway", "BLEHeartRate", "DBus", "DBusTestSupport", "WebhookTestSupport", "RPPGSynthetic"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "CameraProviderTests",
            dependencies: [
                "CameraProvider", "GatewayEngine", "V4L2Capture", "V4L2TestSupport", "RPPG", "RPPGSynthetic", "FaceDetection",
            ],
            swiftSettings: strict
        ),
        .testTarget(name: "GatewayConfigTests", dependencies: ["GatewayConfig"], swiftSettings: strict),
        .testTarget(name: "SystemCallsTests", dependencies: ["SystemCalls"], swiftSettings: strict),
        .testTarget(
            name: "GatewayLoggingTests",
            dependencies: ["GatewayLogging", "hr-gateway", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),
        .testTarget(
            name: "GatewayDoctorTests",
            dependencies: ["GatewayDoctor", "GatewayStorage", "hr-gateway", "DBus", "DBusTestSupport"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SessionStoreTests",
            dependencies: [
                "SessionStore", "GatewayEngine", "GatewayStorage", "SimulatedProvider", "ReplayProvider",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "RelaySinkTests",
            dependencies: [
                "RelayCore", "RelayStore", "RelayWebServer", "RelayWSClient", "GatewayEngine", "SimulatedProvider",
                "StorageTestSupport", .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "NIOEmbedded", package: "swift-nio"), .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "WebhookSinkTests",
            dependencies: ["WebhookSink", "WebhookTestSupport", "StorageTestSupport", "GatewayEngine", "GatewayStorage"],
            swiftSettings: strict
        ),
        .testTarget(name: "MQTTSinkTests", dependencies: ["MQTTSink", "GatewayEngine", "HRVAnalysis"], swiftSettings: strict),
        .testTarget(name: "GatewayMetricsTests", dependencies: ["GatewayMetrics", "GatewayEngine"], swiftSettings: strict),
        .testTarget(
            name: "DBusTests", dependencies: ["DBus", "DBusTestSupport"], resources: [.copy("Data")], swiftSettings: strict
        ),
        .testTarget(name: "BlueZTests", dependencies: ["BlueZ", "DBus", "DBusTestSupport"], swiftSettings: strict),
        .testTarget(name: "RPPGAnalysisTests", dependencies: ["RPPGAnalysis"], swiftSettings: strict),
        .testTarget(
            name: "FaceDetectionTests", dependencies: ["FaceDetection", "RPPG", "RPPGSynthetic"], swiftSettings: strict
        ),
        .testTarget(
            name: "RPPGTests",
            dependencies: ["RPPG", "RPPGSynthetic", "GatewayEngine"],
            resources: [.copy("Data")],
            swiftSettings: strict
        ),
    ]
)
