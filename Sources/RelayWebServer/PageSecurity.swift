import Crypto
import Foundation
import HTTPTypes
import Hummingbird

/// The headers that keep the gateway's pages to themselves in a browser: a Content-Security-Policy that runs only
/// the page's own inline script and style (by their SHA-256) and `/relay.js`, so that text from a sensor, a session
/// or a query string that ever reached the page as HTML could not run; no framing of the dashboard by another site
/// (its Start and Stop buttons under a decoy page); no content-type sniffing of exports; no `Referer` sent from them.
///
/// The overlay may be framed (streaming tools embed browser sources), and the WebSocket is not restricted by the
/// policy (`connect-src 'self'` covers `ws:` only in recent browsers; the relay's token guards it).
enum PageSecurity {
    /// Headers for every answer of the HTTP routes.
    static let common: HTTPFields = [.init("X-Content-Type-Options")!: "nosniff", .init("Referrer-Policy")!: "no-referrer"]

    /// The headers of an HTML page: its policy, and no framing unless `frameable`.
    static func headers(for html: String, frameable: Bool) -> HTTPFields {
        var fields = HTTPFields()
        fields[.contentSecurityPolicy] = policy(for: html, frameable: frameable)
        if !frameable { fields[.init("X-Frame-Options")!] = "DENY" }
        return fields
    }

    /// The policy of `html`: its inline `<script>` and `<style>` blocks by hash, scripts from this origin, nothing
    /// else embedded.
    static func policy(for html: String, frameable: Bool) -> String {
        let scripts = inlineBlocks(of: "script", in: html).map(hashSource)
        let styles = inlineBlocks(of: "style", in: html).map(hashSource)
        var directives = [
            "default-src 'self'", "script-src 'self' " + scripts.joined(separator: " "),
            "style-src " + (styles.isEmpty ? "'none'" : styles.joined(separator: " ")),
            "img-src 'self' data:", "object-src 'none'", "base-uri 'none'", "form-action 'none'",
            "connect-src 'self' ws: wss:",
        ]
        if !frameable { directives.append("frame-ancestors 'none'") }
        return directives.joined(separator: "; ")
    }

    /// The text of each `<tag>…</tag>` written without attributes (an inline block; `<script src=…>` has some).
    static func inlineBlocks(of tag: String, in html: String) -> [String] {
        var blocks: [String] = []
        var rest = html[...]
        while let open = rest.range(of: "<\(tag)>"), let close = rest[open.upperBound...].range(of: "</\(tag)>") {
            blocks.append(String(rest[open.upperBound..<close.lowerBound]))
            rest = rest[close.upperBound...]
        }
        return blocks
    }

    static func hashSource(_ text: String) -> String {
        "'sha256-" + Data(SHA256.hash(data: Data(text.utf8))).base64EncodedString() + "'"
    }
}

/// Adds `PageSecurity.common` to every answer of the HTTP routes.
struct PageSecurityMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        var response: Response
        do { response = try await next(request, context) } catch let error as any HTTPResponseError {
            // A refusal (401, 404, 400) is an answer too.
            response = try error.response(from: request, context: context)
        }
        for field in PageSecurity.common where response.headers[field.name] == nil { response.headers.append(field) }
        return response
    }
}
