# Two straps at once. btvirt cannot hold two LE links on one central controller (docs/vm-lane.md pitfall 16: the
# second link's ATT MTU exchange times out), so `stream --strap A --strap B` on one adapter cannot be tested here;
# this runs two streams, each with its own central controller (hci1 -> hci0's strap, hci3 -> hci2's strap), at once.
. "$(dirname "$0")/lib.sh"
read -r ca cb _ <<<"$VM_LANE_FREE_ADAPTERS"
read -r pa pb _ <<<"$VM_LANE_PERIPHERAL_ADAPTERS"
a=$(adapter_address "$pa") b=$(adapter_address "$pb")
start_stream "$OUT/two-a.jsonl" "$OUT/two-a-record.jsonl" --strap "$a" --adapter "$ca" --window 600 --emit-interval 5
pid_a=$STREAM_PID
start_stream "$OUT/two-b.jsonl" "$OUT/two-b-record.jsonl" --strap "$b" --adapter "$cb" --window 600 --emit-interval 5
pid_b=$STREAM_PID
wait_count 120 "$OUT/two-a-record.jsonl" '"rr_1024"' 10 && wait_count 120 "$OUT/two-b-record.jsonl" '"rr_1024"' 10
# Both must be streaming at the same time: the samples of each after the other reached 10.
na=$(grep -c . "$OUT/two-a-record.jsonl"); nb=$(grep -c . "$OUT/two-b-record.jsonl")
wait_count 30 "$OUT/two-a-record.jsonl" '"rr_1024"' $((na + 3)) && wait_count 30 "$OUT/two-b-record.jsonl" '"rr_1024"' $((nb + 3))
stop_pid "$pid_a" & stop_pid "$pid_b"; wait
check strap-a-streams $CHECK count "$OUT/two-a-record.jsonl" $((na + 3)) "$a"
check strap-b-streams $CHECK count "$OUT/two-b-record.jsonl" $((nb + 3)) "$b"
check strap-a-rr-exact $CHECK rr "$OUT/two-a-record.jsonl" "$LANE_RR"
check strap-b-rr-exact $CHECK rr "$OUT/two-b-record.jsonl" "$LANE_RR_B"
finish_scenario
