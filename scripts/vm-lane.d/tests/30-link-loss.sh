# The strap's controller powered off and on: the stream reconnects by itself, flags the gap, duplicates nothing.
. "$(dirname "$0")/lib.sh"
central=$VM_LANE_CENTRAL_ADAPTER
addr=$(adapter_address hci0)
ev=$OUT/linkloss.jsonl rec=$OUT/linkloss-record.jsonl
start_stream "$ev" "$rec" --strap "$addr" --adapter "$central" --window 600 --emit-interval 5
wait_line 90 "$ev" '"state":"streaming"' && wait_count 60 "$rec" '"rr_1024"' 6
before=$(grep -c . "$rec")
set_powered hci0 false
if wait_line 60 "$ev" '"state":"reconnecting"'; then pass link-loss-reported; else fail link-loss-reported "no reconnecting status"; fi
set_powered hci0 true
wait_until 30 advertising hci0
# Tells a fixture problem from a gateway one: a fresh scan must see the strap again.
"$HR_BIN" scan --adapter "$central" --timeout 6 --json >"$OUT/linkloss-scan.jsonl" 2>&1
check strap-visible-again $CHECK scan "$OUT/linkloss-scan.jsonl" "$addr" "$LANE_STRAP_A"
if wait_count 90 "$ev" '"state":"streaming"' 2; then pass reconnected-by-itself; else fail reconnected-by-itself "$(tail -c 400 "$ev.err")"; fi
wait_count 60 "$rec" '"rr_1024"' $((before + 6))
stop_pid "$STREAM_PID"
check status-sequence $CHECK status "$ev" ble_hrm streaming reconnecting streaming
check gap-flagged grep -q '"gap_before":true' "$rec"
check rr-exactly-once-in-order-with-one-gap $CHECK rr "$rec" "$LANE_RR" --gaps 1 --min-rr 3
finish_scenario
