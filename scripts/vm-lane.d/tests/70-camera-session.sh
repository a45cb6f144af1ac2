# stream --strap + --camera: the loopback camera fed with a clip whose pulse is known gives camera HR in the session;
# vivid unplugged (its `disconnect` control) mid-capture gives a camera sensor_status error while the strap streams on.
. "$(dirname "$0")/lib.sh"
if ! "$HR_BIN" stream --help | grep -q -- '--camera'; then
    echo "SKIP $SCENARIO: this hr-gateway has no stream --camera"; finish_scenario
fi
read -r central _ <<<"$VM_LANE_FREE_ADAPTERS"
read -r pa _ <<<"$VM_LANE_PERIPHERAL_ADAPTERS"
addr=$(adapter_address "$pa")
ev=$OUT/camera.jsonl rec=$OUT/camera-record.jsonl
start_stream "$ev" "$rec" --strap "$addr" --adapter "$central" --camera "$VM_LANE_LOOPBACK_DEVICE" \
    --camera-width 320 --camera-height 240 --camera-fps 15 --window 600 --emit-interval 2
if wait_line 150 "$ev" '"camera_hr_bpm"'; then pass camera-hr-in-session
else fail camera-hr-in-session "$(grep sensor_status "$ev" | tail -n3 | tr '\n' ' ') $(tail -c 300 "$ev.err")"; fi
# a few more estimates, then stop
n=$(grep -c '"camera_hr_bpm"' "$ev"); wait_count 30 "$ev" '"camera_hr_bpm"' $((n + 2))
wait_count 90 "$rec" '"rr_1024"' 5
stop_pid "$STREAM_PID"
check camera-hr-matches-clip $CHECK camera-hr "$ev" "$LANE_CLIP_BPM" 5 "${VM_LANE_OUT:-/out}/ffmpeg-progress.log"
check strap-alongside-camera $CHECK count "$rec" 5 "$addr"
# v4l2loopback reports 30 fps whatever its writer keeps; the feeder writes 15 (less on a loaded machine): the provider
# says the pace it measured, once.
check camera-pace-said $CHECK pace "$ev" "${VM_LANE_OUT:-/out}/ffmpeg-progress.log"

ev=$OUT/unplug.jsonl rec=$OUT/unplug-record.jsonl
start_stream "$ev" "$rec" --strap "$addr" --adapter "$central" --camera "$VM_LANE_VIVID_DEVICE" \
    --camera-width 320 --camera-height 240 --window 600 --emit-interval 2
wait_until 120 sh -c "grep -q '\"source\":\"camera_rppg\".*\"state\":\"streaming\"\\|\"state\":\"streaming\".*\"source\":\"camera_rppg\"' '$ev'" \
    && wait_line 120 "$ev" '"source":"ble_hrm".*"state":"streaming"|"state":"streaming".*"source":"ble_hrm"' \
    && wait_count 60 "$rec" '"rr_1024"' 3
v4l2-ctl -d "$VM_LANE_VIVID_DEVICE" -c disconnect=1
if wait_until 60 sh -c "grep '\"source\":\"camera_rppg\"' '$ev' | grep -q '\"state\":\"error\"'"; then
    pass unplug-gives-camera-error "$(grep '"state":"error"' "$ev" | grep -o '"message":"[^"]*"' | head -n1)"
else fail unplug-gives-camera-error "$(grep sensor_status "$ev" | tail -n3 | tr '\n' ' ')"; fi
n=$(grep -c '"rr_1024"' "$rec")
if wait_count 30 "$rec" '"rr_1024"' $((n + 3)); then pass strap-keeps-streaming-after-unplug
else fail strap-keeps-streaming-after-unplug; fi
stop_pid "$STREAM_PID"
check no-session-error sh -c "! grep -q '\"type\":\"session_error\"' '$ev'"
check strap-rr-exact-through-unplug $CHECK rr "$rec" "$LANE_RR" --device "$addr"
finish_scenario
