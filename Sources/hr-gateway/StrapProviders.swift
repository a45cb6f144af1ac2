import BLEHeartRate
import GatewayEngine
import Logging

/// Providers for `stream --strap SPEC …`: one `BLEHeartRateProvider` per spec (`AA:BB:CC:DD:EE:FF`, a name prefix
/// such as `"Polar H10"`, or `auto`), each on its own D-Bus connection to the system bus, on `adapter` (`hciN`) or
/// the first powered adapter. Several `auto` specs follow different straps. Throws `StrapSpecError` for an empty spec or a mistyped address; bus and adapter problems
/// surface when the provider starts.
func makeStrapProviders(specs: [String], adapter: String?, polar: PolarStreams? = nil, logger: Logger) throws
    -> [any BiosignalProvider]
{
    let claims = StrapClaims()
    return try specs.map { text in
        let spec: StrapSpec
        do { spec = try StrapSpec(parsing: text) } catch { throw error }
        return BLEHeartRateProvider(spec: spec, adapter: adapter, claims: claims, polar: polar, logger: logger)
    }
}
