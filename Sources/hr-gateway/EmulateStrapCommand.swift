import ArgumentParser
import BLEHeartRate
import BlueZ
import DBus
import Foundation
import GatewayEngine
import Logging
import StdoutSink
import SystemCalls

/// `hr-gateway emulate-strap`: this machine's adapter acts as a heart-rate strap.
struct EmulateStrapCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "emulate-strap",
        abstract: "Make a local Bluetooth adapter advertise and behave like a heart-rate strap.",
        discussion: """
            Registers a GATT application with bluetoothd (Heart Rate service 0x180D with Heart Rate Measurement \
            0x2A37 notify and Body Sensor Location 0x2A38 = chest, Battery service 0x180F at 100 %) and an LE \
            advertisement under --name. While a central is subscribed, it sends one real Heart Rate Measurement \
            notification per second carrying the RR intervals of --rr, several per packet when the heart rate is \
            above 60 bpm and none in some seconds below it, exactly as straps do; the file loops.

            --rr accepts one RR interval in milliseconds per line, or a CSV with an rr_1024 (1/1024 s) or rr_ms \
            column (e.g. shared/data/hrv/rr_nsrdb_short_pyhrv_raw.csv). Without --rr a steady 60 bpm is sent, or, \
            with --pmd-ecg, the beats of that ECG: its R peaks, sent as a strap sends the RR it derives from its own \
            ECG, each with the ECG it comes from (so `ecg_rr_agreement_ms` in the gateway's frames compares the two).

            --pmd-ecg FILE also serves Polar's Measurement Data service, as an H10 does: bluetoothd takes its \
            control point's requests on an encrypted link only (the central pairs), and once ECG is started it \
            notifies frames of 73 samples every 73/130 s from FILE (µV at 130 Hz, one per line or an ecg_uv column, \
            looping), stamped with the emulated strap's own clock: `hr-gateway stream --strap … --ecg` against it. \
            It also serves the accelerometer (25, 50, 100 or 200 Hz, `stream … --acc HZ`), with synthetic values: \
            gravity on z and a sway on x and y, which carry bytes, not motion. --pmd-ecg-rate HZ makes the ECG \
            run at another rate on the strap's clock and in real time while its settings still say 130 Hz, as a real \
            H10's do (128–131 Hz: a Polar strap's "130 Hz" is its own), to try what the gateway makes of it \
            (`sessions show` says "sampled at 128.6 Hz").

            Use a second adapter (or a second machine) as the central, e.g.:
              hr-gateway emulate-strap --adapter hci1 --name "Polar H10 EMU" --rr rest.txt
              hr-gateway scan --adapter hci0

            Stop with Ctrl-C (the application and advertisement are unregistered). Needs bluetoothd with the \
            peripheral role on the adapter (`bluetoothctl show` lists Roles) and access to org.bluez.
            """
    )

    @Option(name: .long, help: ArgumentHelp("Adapter to advertise on (default: the first powered one).", valueName: "hciN"))
    var adapter: String?

    @Option(name: .long, help: "Advertised local name.")
    var name = "HR Gateway Strap"

    @Option(name: .long, help: ArgumentHelp("RR series to send (ms per line, or CSV with rr_1024/rr_ms).", valueName: "FILE"))
    var rr: String?

    @Option(name: .long, help: ArgumentHelp(
        "Also serve Polar's measurement service streaming this ECG (µV at 130 Hz, one per line or an ecg_uv column).",
        valueName: "FILE"))
    var pmdECG: String?

    @Option(name: .long, help: ArgumentHelp(
        "With --pmd-ecg: the rate the ECG really runs at (120–140; default 130), its settings saying 130 Hz.",
        valueName: "HZ"))
    var pmdECGRate: Double?

    func validate() throws {
        if let pmdECGRate {
            guard pmdECG != nil else { throw ValidationError("--pmd-ecg-rate needs --pmd-ecg FILE (the ECG to stream).") }
            guard pmdECGRate.isFinite, (120...140).contains(pmdECGRate) else {
                throw ValidationError("--pmd-ecg-rate \(String(format: "%g", pmdECGRate)): a rate between 120 and 140 Hz (an H10's is 128–131).")
            }
        }
    }

    /// Why a file could not be read as text, in words (not Foundation's "The operation could not be completed").

    func run() async throws {
        var logger = Logger(label: "hr-gateway.emulate-strap")
        logger.logLevel = .warning
        var series = [UInt16](repeating: 1024, count: 60)
        if let rr {
            let text: String
            do { text = String(decoding: try SystemCall.readFile(rr, notA: "an RR file"), as: UTF8.self) } catch {
                throw CommandFailure("cannot read --rr \(rr): \(error.reason)")
            }
            do { series = try RRSeries(parsing: text, name: rr).rr1024 } catch { throw CommandFailure("\(error)") }
        }
        var ecg: [Int32]?
        if let pmdECG {
            let text: String
            do { text = String(decoding: try SystemCall.readFile(pmdECG, notA: "an ECG file"), as: UTF8.self) } catch {
                throw CommandFailure("cannot read --pmd-ecg \(pmdECG): \(error.reason)")
            }
            let lines = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            let values = lines.filter { !$0.isEmpty && $0 != "ecg_uv" }.map { Int32($0) }
            guard !values.isEmpty, values.allSatisfy({ $0 != nil }) else {
                throw CommandFailure("--pmd-ecg \(pmdECG): expected one whole number of µV per line (or an ecg_uv column)")
            }
            ecg = values.map { $0! }
        }
        // Without --rr, a strap with an ECG sends the beats of that ECG.
        var firstPeakMs: Int64 = 0
        var beatsFrom = rr.map { "the \(series.count) RR intervals of \($0)" } ?? "60 bpm"
        if rr == nil, let ecg {
            if let beats = StrapEmulator.ECGBeats(looping: ecg, rateHz: pmdECGRate ?? 130) {
                series = beats.rr1024
                firstPeakMs = Int64(beats.firstPeakMs.rounded())
                beatsFrom = "the ECG's \(beats.rr1024.count) beats"
            } else {
                StandardStream.error.write(Data(("note: --pmd-ecg \(pmdECG ?? ""): no two heartbeats found in the ECG "
                    + "to send as RR; sending a steady 60 bpm (give other beats with --rr FILE)\n").utf8))
            }
        }
        let connection: DBusConnection
        do { connection = try await DBusConnection.connect(to: .system, logger: logger) } catch {
            throw CommandFailure(BLEHeartRateError.systemBusUnreachable(error).description)
        }
        defer { connection.close() }
        let bluez: BlueZClient
        do { bluez = try await BlueZClient.start(on: connection, logger: logger) } catch {
            throw CommandFailure(BLEHeartRateError.from(error).description)
        }
        defer { bluez.close() }
        guard bluez.bluetoothdRunning else { throw CommandFailure(BLEHeartRateError.noBluetoothd.description) }
        let adapterPath: DBusObjectPath
        do { adapterPath = try StrapScan.chooseAdapter(adapter, in: bluez.tree) } catch {
            throw CommandFailure(error.description)
        }
        let emulator = StrapEmulator(
            connection: connection, adapter: adapterPath, name: name, rr1024: series, firstPeakMs: firstPeakMs,
            pmdECG: ecg, pmdECGRateHz: pmdECGRate ?? 130, logger: logger)
        do { try await emulator.start() } catch {
            throw CommandFailure("cannot register the strap with bluetoothd on \(adapterPath): \(error)")
        }
        var what = "advertising \"\(name)\" on \(adapterPath.rawValue) with \(beatsFrom)"
        if let ecg {
            let rate = pmdECGRate.map { String(format: " at %g Hz", $0) } ?? ""
            what += " and Polar's measurement service (\(ecg.count) ECG samples\(rate))"
        }
        StandardStream.error.write(Data((what + "; Ctrl-C to stop\n").utf8))

        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        let (stop, stopped) = AsyncStream<Void>.makeStream()
        let sources = [SIGINT, SIGTERM].map { sig in
            let s = DispatchSource.makeSignalSource(signal: sig, queue: .main)
            s.setEventHandler { stopped.yield() }
            s.resume()
            return s
        }
        for await _ in stop { break }
        sources.forEach { $0.cancel() }
        await emulator.stop()
        StandardStream.error.write(Data(
            ("stopped after \(emulator.sentCount) notifications"
                + (ecg == nil ? "" : ", \(emulator.sentECGSamples) ECG and \(emulator.sentAccelerometerSamples) "
                    + "accelerometer samples") + "\n").utf8))
    }
}
