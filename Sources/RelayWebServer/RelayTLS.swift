import Crypto
import Foundation
import NIOSSL
import SwiftASN1
import SystemCalls
import X509

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
        return Self.fingerprint(der: der)
    }

    /// SHA-256 of DER bytes, as colon-separated uppercase hex.
    static func fingerprint(der: [UInt8]) -> String {
        SHA256.hash(data: der).map { String(format: "%02X", $0) }.joined(separator: ":")
    }

    /// The DER bytes of the first `CERTIFICATE` block of a PEM file (a chain lists the server's own first).
    static func firstCertificateDER(_ pem: String) -> [UInt8]? {
        guard let documents = try? PEMDocument.parseMultiple(pemString: pem) else { return nil }
        return documents.first { $0.discriminator == "CERTIFICATE" }?.derBytes
    }

    /// Creates a self-signed P-256 certificate (valid for ten years) and its key when they do not both exist yet.
    /// The key is written first, mode 0600, as PKCS #8 PEM; then the certificate, as PEM.
    public func createSelfSignedIfMissing(commonName: String = "hr-gateway", now: Date = Date()) throws {
        let fm = FileManager.default
        if fm.fileExists(atPath: certificatePath) && fm.fileExists(atPath: keyPath) { return }
        let (certificatePEM, keyPEM): (String, String)
        do { (certificatePEM, keyPEM) = try Self.makeSelfSigned(commonName: commonName, now: now) } catch {
            throw RelayServerError("Cannot make a self-signed certificate (\(error)); pass --tls-cert and --tls-key instead.")
        }
        for dir in Set([certificatePath, keyPath].map { SystemCall.parentDirectory(of: $0) }) {
            do {
                try fm.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw RelayServerError("Cannot create \(dir) for the TLS certificate: \(error.localizedDescription).")
            }
        }
        try Self.writeFile(keyPEM, to: keyPath, mode: 0o600)
        try Self.writeFile(certificatePEM, to: certificatePath, mode: 0o644)
        // Made by root in a service's state directory (`sudo hr-gateway token create --tls`): the service's, as the
        // directory is, or the service could not read its key and made a new pair (a new fingerprint) at start.
        for file in [keyPath, certificatePath] {
            let dir = SystemCall.parentDirectory(of: file)
            var owner = stat()
            guard geteuid() == 0, stat(SystemCall.parentDirectory(of: dir), &owner) == 0, owner.st_uid != 0 else {
                continue
            }
            _ = chown(dir, owner.st_uid, owner.st_gid)
            _ = chown(file, owner.st_uid, owner.st_gid)
        }
    }

    /// A self-signed server certificate (its own root, path length 0) and its private key, both PEM.
    static func makeSelfSigned(commonName: String, now: Date) throws -> (certificate: String, key: String) {
        let key = P256.Signing.PrivateKey()
        let signer = Certificate.PrivateKey(key)
        let name = try DistinguishedName { CommonName(commonName) }
        var names: [GeneralName] = [.dnsName("localhost")]
        if commonName != "localhost" { names.insert(.dnsName(commonName), at: 0) }
        let extensions = try Certificate.Extensions {
            // Its own trust anchor: a client that pins it trusts it as the only root, which BoringSSL accepts only
            // from a CA certificate (as `openssl req -x509` makes by default).
            Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
            Critical(KeyUsage(digitalSignature: true, keyCertSign: true))
            try ExtendedKeyUsage([.serverAuth])
            SubjectAlternativeNames(names)
        }
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: signer.publicKey,
            // An hour of slack for a clock that is a little behind the one that made the certificate.
            notValidBefore: now.addingTimeInterval(-3600),
            notValidAfter: now.addingTimeInterval(3650 * 24 * 3600),
            issuer: name,
            subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: extensions,
            issuerPrivateKey: signer)
        return (try certificate.serializeAsPEM().pemString, key.pemRepresentation)
    }

    /// Writes `text` to `path` through a temporary file created with `mode`, so no reader sees half a file and the
    /// key is never readable by others, not even for a moment.
    private static func writeFile(_ text: String, to path: String, mode: mode_t) throws {
        let tmp = path + ".tmp"
        unlink(tmp)
        let fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else { throw RelayServerError("Cannot write \(tmp): \(String(cString: strerror(errno))).") }
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        close(fd)
        guard written == bytes.count, synced, rename(tmp, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(tmp)
            throw RelayServerError("Cannot write \(path): \(reason).")
        }
    }
}
