import BlueZ
import DBus
import GatewayEngine

/// One heart-rate strap as `hr-gateway scan` shows it.
public struct StrapScanRow: Sendable, Equatable {
    public var address: String
    public var name: String?
    public var rssi: Int?
    /// Why it counts as a strap (service UUID or known name), nil if only its Polar broadcast identifies it.
    public var match: StrapMatch?
    public var connected: Bool
    /// Battery1.Percentage when BlueZ has it.
    public var batteryPercent: Int?
    /// Heart rate from a Polar advertisement, readable without connecting.
    public var broadcastHeartRate: Int?

    /// One JSON object: `address`, `name`, `rssi`, `hr_service`, `match`, `connected`, `battery_percent`,
    /// `broadcast_hr_bpm` (absent keys = unknown).
    public var jsonValue: JSONValue {
        var o: [String: JSONValue] = [
            "address": .string(address),
            "connected": .bool(connected),
            "hr_service": .bool(match == .heartRateService),
        ]
        if let name { o["name"] = .string(name) }
        if let rssi { o["rssi"] = .int(Int64(rssi)) }
        switch match {
        case .heartRateService?: o["match"] = .string("service_uuid")
        case .knownName(let p)?: o["match"] = .string("name:\(p)")
        case nil: o["match"] = .string("polar_broadcast")
        }
        if let b = batteryPercent { o["battery_percent"] = .int(Int64(b)) }
        if let h = broadcastHeartRate { o["broadcast_hr_bpm"] = .int(Int64(h)) }
        return .object(o)
    }
}

/// Builds the scan table from BlueZ's object tree (pure, so it is tested without a bus).
public enum StrapScan {
    /// Heart-rate straps among the devices of `adapter`, strongest signal first.
    public static func rows(in tree: BlueZObjectTree, adapter: DBusObjectPath) -> [StrapScanRow] {
        tree.devices(of: adapter).compactMap { d -> StrapScanRow? in
            guard let address = d.address else { return nil }
            let name = d.name ?? d.alias
            let match = StrapRecognizer.match(uuids: d.uuids, name: name)
            let polar = polarBroadcast(d.properties["ManufacturerData"])
            guard match != nil || polar != nil else { return nil }
            return StrapScanRow(
                address: address.uppercased(), name: name, rssi: d.rssi.map(Int.init), match: match,
                connected: d.connected, batteryPercent: d.batteryPercentage.map(Int.init),
                broadcastHeartRate: polar.map { Int($0.heartRate) })
        }.sorted { ($0.rssi ?? .min, $1.address) > ($1.rssi ?? .min, $0.address) }
    }

    /// Polar's entry (company 0x006B) in a BlueZ `ManufacturerData` value (`a{qv}`).
    static func polarBroadcast(_ value: DBusValue?) -> PolarBroadcast? {
        guard let entries = value?.unwrapped.dictionaryEntries else { return nil }
        for (k, v) in entries where k.unwrapped.uint16 == PolarBroadcast.companyId {
            if let bytes = v.unwrapped.bytes { return PolarBroadcast(payload: bytes) }
        }
        return nil
    }

    /// A fixed-width text table with a header line.
    public static func table(_ rows: [StrapScanRow]) -> String {
        let header = ["NAME", "ADDRESS", "RSSI", "HR SERVICE", "CONNECTED", "BATTERY", "BROADCAST HR"]
        let body = rows.map { r -> [String] in
            [
                r.name ?? "?", r.address, r.rssi.map { "\($0) dBm" } ?? "-",
                r.match == .heartRateService ? "yes" : (r.match == nil ? "no (broadcast)" : "by name"),
                r.connected ? "yes" : "no", r.batteryPercent.map { "\($0) %" } ?? "-",
                r.broadcastHeartRate.map { "\($0) bpm" } ?? "-",
            ]
        }
        let widths = header.indices.map { i in ([header] + body).map { $0[i].count }.max() ?? 0 }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { i, c in c + String(repeating: " ", count: widths[i] - c.count) }
                .joined(separator: "  ").trimmingTrailingSpaces()
        }
        return ([line(header)] + body.map(line)).joined(separator: "\n")
    }

    /// The adapter the strap code would use (`hciN`, or the first powered central); throws what to do otherwise.
    public static func chooseAdapter(_ name: String?, in tree: BlueZObjectTree) throws(BLEHeartRateError) -> DBusObjectPath {
        try StrapSession.chooseAdapter(name, in: tree)
    }
}

extension String {
    fileprivate func trimmingTrailingSpaces() -> String {
        var s = self
        while s.last == " " { s.removeLast() }
        return s
    }
}
