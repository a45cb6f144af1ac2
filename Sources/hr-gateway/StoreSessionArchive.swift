import GatewayEngine
import RelayWebServer
import SessionStore

/// The session store as the dashboard's session list (`GET /v1/sessions`, exports). Opened on the first request and
/// kept: every read is a transaction of its own, which sees what another process (a `stream` recording beside this
/// `serve`) has committed, so nothing is stale; a failed open is tried again at the next request.
final class StoreSessionArchive: SessionArchive {
    let directory: String
    private let opened = Locked<SessionStore?>(nil)

    init(directory: String) { self.directory = directory }

    private func store() throws -> SessionStore {
        try opened.withLock { cached in
            if let cached { return cached }
            let store = try SessionStore(directory: directory)
            cached = store
            return store
        }
    }

    func listJSON(limit: Int) throws -> String {
        let store = try store()
        let newest = try store.list(newest: limit).reversed()
        return JSONValue.array(newest.map(store.listed)).jsonString
    }

    func export(id: String, format: String) throws -> SessionArchiveFile? {
        guard let f = SessionExport.Format(rawValue: format) else {
            throw SessionArchiveError.badFormat(format, supported: SessionExport.Format.allCases.map(\.rawValue))
        }
        let store = try store()
        guard try store.session(id: id) != nil else { return nil }
        let type = switch f {
        case .csv, .ecgCSV, .accCSV: "text/csv; charset=utf-8"
        case .json: "application/json"
        case .jsonl: "application/x-ndjson"
        case .edf: "application/octet-stream"
        }
        let body: [UInt8]
        do { body = try store.export(id: id, format: f) } catch {
            if case .nothingToExport(let why) = error { throw SessionArchiveError.nothingToExport(why) }
            throw error
        }
        return SessionArchiveFile(contentType: type, filename: "session-\(id).\(f.fileExtension)", body: body)
    }
}
