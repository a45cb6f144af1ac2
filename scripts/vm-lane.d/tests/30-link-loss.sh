# The strap's controller powered off and on: the stream reports the loss, reconnects by itself, flags the gap and
# duplicates nothing. btvirt (kernel 6.1, bluez 5.66) does not resume the emulator's registered advertisement after
# the controller is powered on again (ActiveInstances says 1, but no central finds it: docs/vm-lane.md pitfall 18),
# so the strap is restarted after power-on, like a strap that rebooted: its series starts again (`--restart 1`).
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
emu=$(emulator_pid hci0)
[ -n "$emu" ] && stop_pid "$emu" 15
if start_emulator hci0 "$LANE_STRAP_A" "$VM_LANE_OUT/peripheral-hci0-after-power.log"; then pass strap-back
else fail strap-back "$(tail -c 300 "$VM_LANE_OUT/peripheral-hci0-after-power.log")"; fi
if wait_count 90 "$ev" '"state":"streaming"' 2; then pass reconnected-by-itself; else fail reconnected-by-itself "$(grep sensor_status "$ev" | tail -n2 | tr '\n' ' ')"; fi
wait_count 60 "$rec" '"rr_1024"' $((before + 6))
stop_pid "$STREAM_PID"
check status-sequence $CHECK status "$ev" ble_hrm streaming reconnecting streaming
check gap-flagged grep -q '"gap_before":true' "$rec"
check rr-runs-exact-one-gap $CHECK rr "$rec" "$LANE_RR" --gaps 1 --min-rr 3 --restart 1
finish_scenario
