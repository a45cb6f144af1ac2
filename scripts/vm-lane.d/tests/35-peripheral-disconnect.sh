# The strap drops the link (the peripheral side disconnects, as a strap walking out of range does): the stream
# reconnects by itself, flags the gap, duplicates nothing.
. "$(dirname "$0")/lib.sh"
central=$VM_LANE_CENTRAL_ADAPTER
addr=$(adapter_address hci0) caddr=$(adapter_address "$central")
ev=$OUT/disconnect.jsonl rec=$OUT/disconnect-record.jsonl
start_stream "$ev" "$rec" --strap "$addr" --adapter "$central" --window 600 --emit-interval 5
wait_line 90 "$ev" '"state":"streaming"' && wait_count 60 "$rec" '"rr_1024"' 6
before=$(grep -c . "$rec")
peer=/org/bluez/hci0/dev_$(tr ':' '_' <<<"$caddr")
busctl --system call org.bluez "$peer" org.bluez.Device1 Disconnect
if wait_line 60 "$ev" '"state":"(reconnecting|stale|connecting|searching)"'; then pass link-loss-reported
else fail link-loss-reported "$(grep sensor_status "$ev" | tail -n2 | tr '\n' ' ')"; fi
if wait_count 90 "$ev" '"state":"streaming"' 2; then pass reconnected-by-itself; else fail reconnected-by-itself "$(tail -c 400 "$ev.err")"; fi
wait_count 60 "$rec" '"rr_1024"' $((before + 6))
stop_pid "$STREAM_PID"
check status-sequence $CHECK status "$ev" ble_hrm streaming reconnecting streaming
check gap-flagged grep -q '"gap_before":true' "$rec"
check rr-exactly-once-in-order-with-one-gap $CHECK rr "$rec" "$LANE_RR" --gaps 1 --min-rr 3
finish_scenario
