# stream --strap receives the emulated strap's RR series exactly once and in order; HRV matches `hr-gateway hrv`.
. "$(dirname "$0")/lib.sh"
central=$VM_LANE_CENTRAL_ADAPTER
addr=$(adapter_address hci0)
ev=$OUT/stream.jsonl rec=$OUT/stream-record.jsonl
start_stream "$ev" "$rec" --strap "$addr" --adapter "$central" --window 600 --emit-interval 5 --correct kubios
if wait_line 90 "$ev" '"state":"streaming"'; then pass streaming-status; else fail streaming-status "$(tail -c 400 "$ev.err")"; fi
wait_count 90 "$rec" '"rr_1024"' 20 && wait_count 30 "$ev" '"rr_count".*"type":"session_frame"' 3
stop_pid "$STREAM_PID"
check summary-printed grep -q '"type":"session_summary"' "$ev"
check rr-exactly-once-in-order $CHECK rr "$rec" "$LANE_RR"
check frame-hrv-equals-hrv-command $CHECK hrv "$ev" "$HR_BIN" kubios
check summary-hrv-equals-hrv-command $CHECK summary-hrv "$ev" "$rec" "$HR_BIN" kubios
finish_scenario
