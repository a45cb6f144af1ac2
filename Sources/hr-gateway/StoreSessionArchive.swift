import GatewayEngine
import RelayWebServer
import SessionStore

/// The session store as the dashboard's session list (`GET /v1/sessions`, exports): opened per request, so that a
/// store another process writes is read as it is now.
struct StoreSessionArchive: SessionArchive {
    let directory: String

    func listJSON(limit: Int) throws -> String {
        let store = try SessionStore(directory: directory)
        let newest = try store.list().suffix(limit).reversed()
        return JSONValue.array(newest.map { s in
            guard case .object(var o) = s.jsonValue else { return s.jsonValue }
            if let pacing = store.pacingSummary(s) { o["pacing"] = .string(pacing) }
            return .object(o)
        }).jsonString
    }

    func export(id: String, format: String) throws -> SessionArchiveFile? {
        guard let f = SessionExport.Format(rawValue: format) else {
            throw SessionArchiveError.badFormat(format, supported: SessionExport.Format.allCases.map(\.rawValue))
        }
        let store = try SessionStore(directory: directory)
        guard try store.session(id: id) != nil else { return nil }
        let type = switch f {
        case .csv: "text/csv; charset=utf-8"
        case .json: "application/json"
        case .jsonl: "application/x-ndjson"
        case .edf: "application/octet-stream"
        }
        return SessionArchiveFile(contentType: type, filename: "session-\(id).\(f.rawValue)", body: try store.export(id: id, format: f))
    }
}
