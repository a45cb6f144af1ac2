# hr-gateway scan --json on the central controller finds the emulated strap by its 0x180D advertisement.
. "$(dirname "$0")/lib.sh"
central=$VM_LANE_CENTRAL_ADAPTER
addr=$(adapter_address hci0)
"$HR_BIN" scan --adapter "$central" --timeout 8 --json >"$OUT/scan.jsonl" 2>"$OUT/scan.err"
check scan-exit test $? -eq 0
check finds-emulated-strap $CHECK scan "$OUT/scan.jsonl" "$addr" "$LANE_STRAP_A"
finish_scenario
