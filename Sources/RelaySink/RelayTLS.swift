import Crypto
import Foundation
import NIOSSL

/// A PEM certificate chain and private key for `wss://`.
public struct RelayTLSFiles: Sendable, Equatable {
    public var certificatePath: String
    public var keyPath: String

    public init(certificatePath: String, keyPath: String) {
        self.certificatePath = certificatePath
        self.keyPath = keyPath
    }

    /// `tls/cert.pem` and `tls/key.pem` in the state directory.
    public static func inStateDirectory(_ directory: String) -> RelayTLSFiles {
        RelayTLSFiles(certificatePath: directory + "/tls/cert.pem", keyPath: directory + "/tls/key.pem")
    }

    func serverConfiguration() throws -> TLSConfiguration {
        do {
            let chain = try NIOSSLCertificate.fromPEMFile(certificatePath).map { NIOSSLCertificateSource.certificate($0) }
            let key = try NIOSSLPrivateKey(file: keyPath, format: .pem)
            return TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(key))
        } catch {
            throw RelayServerError(
                "Cannot load the TLS certificate \(certificatePath) and key \(keyPath) (\(error)): both must be PEM files.")
        }
    }

    /// SHA-256 of the first certificate (DER), as colon-separated uppercase hex: what a client pins.
    public func fingerprint() throws -> String {
        guard let pem = try? String(contentsOfFile: certificatePath, encoding: .utf8) else {
            throw RelayServerError("Cannot read \(certificatePath).")
        }
        guard let der = Self.firstCertificateDER(pem) else {
            throw RelayServerError("\(certificatePath) holds no PEM certificate.")
        }
        return SHA256.hash(data: der).map { String(format: "%02X", $0) }.joined(separator: ":")
    }

    static func firstCertificateDER(_ pem: String) -> [UInt8]? {
        guard let begin = pem.range(of: "-----BEGIN CERTIFICATE-----"),
            let end = pem.range(of: "-----END CERTIFICATE-----", range: begin.upperBound..<pem.endIndex)
        else { return nil }
        let body = pem[begin.upperBound..<end.lowerBound].filter { !$0.isWhitespace }
        return Data(base64Encoded: String(body)).map { [UInt8]($0) }
    }

    /// Creates a self-signed P-256 certificate and key with `openssl` when they do not exist yet (key mode 0600).
    public func createSelfSignedIfMissing(commonName: String = "hr-gateway") throws {
        let fm = FileManager.default
        if fm.fileExists(atPath: certificatePath) && fm.fileExists(atPath: keyPath) { return }
        let dir = (certificatePath as NSString).deletingLastPathComponent
        try fm.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-days", "3650", "-subj", "/CN=\(commonName)", "-keyout", keyPath, "-out", certificatePath,
        ]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        do { try p.run() } catch {
            throw RelayServerError("Cannot run openssl to make a certificate (\(error)); install it (apt-get install openssl).")
        }
        p.waitUntilExit()
        guard p.terminationStatus == 0 else {
            throw RelayServerError("openssl could not create \(certificatePath); pass --tls-cert and --tls-key instead.")
        }
        chmod(keyPath, 0o600)
    }
}
