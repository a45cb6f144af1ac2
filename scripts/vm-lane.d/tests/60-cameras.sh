# hr-gateway cameras lists vivid and the v4l2loopback camera with their formats; --capture from both.
. "$(dirname "$0")/lib.sh"
"$HR_BIN" cameras --json >"$OUT/cameras.jsonl" 2>"$OUT/cameras.err"
check cameras-exit test $? -eq 0
check lists-vivid $CHECK cameras "$OUT/cameras.jsonl" "$VM_LANE_VIVID_DEVICE" vivid YUYV
check lists-loopback $CHECK cameras "$OUT/cameras.jsonl" "$VM_LANE_LOOPBACK_DEVICE" "v4l2 loopback" YUYV
"$HR_BIN" cameras --capture "$VM_LANE_VIVID_DEVICE" --format YUYV --frames 10 --settle-frames 2 --json \
    >"$OUT/capture-vivid.jsonl" 2>"$OUT/capture-vivid.err"
check capture-vivid-yuyv $CHECK capture "$OUT/capture-vivid.jsonl" 10 YUYV
"$HR_BIN" cameras --capture "$VM_LANE_LOOPBACK_DEVICE" --frames 10 --settle-frames 2 --json \
    >"$OUT/capture-loopback.jsonl" 2>"$OUT/capture-loopback.err"
check capture-loopback $CHECK capture "$OUT/capture-loopback.jsonl" 10 YUYV
finish_scenario
