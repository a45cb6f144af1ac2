# bluetoothd restarted mid-session: the emulator registers again by itself (its registrations die with the old
# bluetoothd), and the gateway recovers and streams again.
. "$(dirname "$0")/lib.sh"
central=$VM_LANE_CENTRAL_ADAPTER
addr=$(adapter_address hci0)
ev=$OUT/btd-restart.jsonl rec=$OUT/btd-restart-record.jsonl
start_stream "$ev" "$rec" --strap "$addr" --adapter "$central" --window 600 --emit-interval 5
wait_line 90 "$ev" '"state":"streaming"' && wait_count 60 "$rec" '"rr_1024"' 5
before=$(grep -c . "$rec")
old=$(pidof bluetoothd)
kill "$old"
wait_until 30 sh -c "! kill -0 $old"
/usr/libexec/bluetooth/bluetoothd -n ${VM_LANE_BLUETOOTHD_ARGS:--d} >>"$VM_LANE_OUT/bluetoothd-2.log" 2>&1 &
if wait_until 30 adapter_ready hci0 && wait_until 30 adapter_ready "$central"; then pass bluetoothd-back
else fail bluetoothd-back; fi
if wait_until 30 advertising hci0; then pass emulator-registered-again-by-itself
else fail emulator-registered-again-by-itself "no advertisement on hci0 30 s after bluetoothd came back"; fi
if wait_count 120 "$rec" '"rr_1024"' $((before + 5)); then pass streams-again "$(( $(grep -c . "$rec") - before )) new samples"
else fail streams-again "$(grep sensor_status "$ev" | tail -n3 | tr '\n' ' ') $(tail -c 300 "$ev.err")"; fi
stop_pid "$STREAM_PID"
check no-session-error sh -c "! grep -q '\"type\":\"session_error\"' '$ev'"
check status-sequence $CHECK status "$ev" ble_hrm streaming reconnecting streaming
check rr-runs-exact-one-gap $CHECK rr "$rec" "$LANE_RR" --gaps 1 --min-rr 3
finish_scenario
