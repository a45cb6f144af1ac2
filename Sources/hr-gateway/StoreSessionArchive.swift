import Foundation
import GatewayEngine
import RelayWebServer
import SessionStore
import SystemCalls

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
        let filename = "session-\(id).\(f.fileExtension)"
        do throws(StoreError) {
            // Written to an unnamed file as it is made, and sent from there; in memory only where the file system
            // cannot make one.
            guard let fd = SpooledExport.create(in: directory) else {
                return SessionArchiveFile(contentType: type, filename: filename, body: try store.export(id: id, format: f))
            }
            var size = 0
            let output = ExportOutput { bytes in
                var failure: SystemCallError?
                bytes.withUnsafeBytes { raw in
                    do throws(SystemCallError) { try SystemCall.writeAll(fd, raw) } catch { failure = error }
                }
                if let failure { throw failure }
                size += bytes.count
            }
            do {
                try store.export(id: id, format: f, into: output)
                try output.finish()
            } catch {
                close(fd)
                if let e = error as? StoreError { throw e }
                throw StoreError.io("cannot write the export to a file in \(directory): \(error)")
            }
            return SessionArchiveFile(contentType: type, filename: filename, spool: SpooledExport(fd: fd, size: size))
        } catch {
            if case .nothingToExport(let why) = error { throw SessionArchiveError.nothingToExport(why) }
            throw error
        }
    }
}
