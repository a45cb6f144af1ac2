# hr-gateway scan --json on the central controller finds the emulated strap by its 0x180D advertisement.
# A scan is retried (each one its own --timeout) until the strap shows up or 60 s have passed: under TCG the first
# discovery right after boot sometimes sees no advertisement within 8 s.
. "$(dirname "$0")/lib.sh"
central=$VM_LANE_CENTRAL_ADAPTER
addr=$(adapter_address hci0)
scan_finds() {
    attempts=$((attempts + 1))
    "$HR_BIN" scan --adapter "$central" --timeout 8 --json >"$OUT/scan.jsonl" 2>"$OUT/scan.err"
    grep -qi "\"address\":\"$addr\"" "$OUT/scan.jsonl"
}
attempts=0
deadline=$(( $(date +%s) + 60 ))
until scan_finds || [ "$(date +%s)" -ge "$deadline" ]; do :; done
check finds-emulated-strap $CHECK scan "$OUT/scan.jsonl" "$addr" "$LANE_STRAP_A"
echo "scan attempts: $attempts"
finish_scenario
