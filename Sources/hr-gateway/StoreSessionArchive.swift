import Foundation
import GatewayEngine
import RelayWebServer
import SessionStore
import Synchronization
import SystemCalls

/// The session store as the dashboard's session list (`GET /v1/sessions`, exports). Its connections are opened as
/// they are first needed and kept, one for each read running at once (the list's, and each export's): one
/// connection would make the list wait behind an export. Every read is a transaction of its own, which sees what
/// another process (a `stream` recording beside this `serve`) has committed, so nothing is stale; a failed open is
/// tried again at the next request.
final class StoreSessionArchive: SessionArchive {
    let directory: String
    /// Connections not in use.
    private let idle = Mutex<[SessionStore]>([])

    init(directory: String) { self.directory = directory }

    var spoolDirectory: String { directory }

    /// `body` with a connection of its own, kept for the next read.
    private func withStore<T>(_ body: (SessionStore) throws -> T) throws -> T {
        let store = try idle.withLock { $0.popLast() } ?? SessionStore(directory: directory)
        defer { idle.withLock { $0.append(store) } }
        return try body(store)
    }

    func listJSON(limit: Int, before: String?) throws -> String? {
        try withStore { store in
            let newest: [RecordedSession]
            do throws(StoreError) { newest = try store.list(newest: limit, before: before).reversed() } catch {
                if case .sessionNotFound = error { return nil }
                throw error
            }
            return JSONValue.array(newest.map(store.listed)).jsonString
        }
    }

    func plan(id: String, format: String) throws -> ExportPlan? {
        guard let f = SessionExport.Format(rawValue: format) else {
            throw SessionArchiveError.badFormat(format, supported: SessionExport.Format.allCases.map(\.rawValue))
        }
        return try withStore { store in
            let full: String
            do throws(StoreError) {
                full = try store.resolve(id)
                try store.checkExport(id: full, format: f)
            } catch {
                switch error {
                case .sessionNotFound: return nil
                case .ambiguousPrefix: throw SessionArchiveError.ambiguousId(error.description)
                case .nothingToExport(let why): throw SessionArchiveError.nothingToExport(why)
                default: throw error
                }
            }
            let type = switch f {
            case .csv, .ecgCSV, .accCSV: "text/csv; charset=utf-8"
            case .json: "application/json"
            case .jsonl: "application/x-ndjson"
            case .edf: "application/octet-stream"
            }
            return ExportPlan(id: full, format: f.rawValue, contentType: type, filename: "session-\(full).\(f.fileExtension)")
        }
    }

    func export(_ plan: ExportPlan, into body: ExportBody) throws -> Bool {
        guard let f = SessionExport.Format(rawValue: plan.format) else {
            throw SessionArchiveError.badFormat(plan.format, supported: SessionExport.Format.allCases.map(\.rawValue))
        }
        return try withStore { store in
            let output = ExportOutput(sink: { try body.write($0) }, cancelled: { body.isCancelled })
            do throws(StoreError) {
                try store.export(id: plan.id, format: f, into: output)
            } catch {
                switch error {
                case .sessionNotFound: return false
                case .nothingToExport(let why): throw SessionArchiveError.nothingToExport(why)
                default: throw error
                }
            }
            try output.finish()
            return true
        }
    }
}
