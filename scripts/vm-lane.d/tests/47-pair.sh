# hr-gateway pair and unpair through the real bluetoothd. After 45-ecg both sides hold the bond. unpair removes the
# strap and its keys on the gateway's side, and the strap forgets too (its side removes the central), so both start
# afresh, as with a new strap. pair then finds it (a discovery: bluetoothd no longer knows it), pairs "Just Works"
# with its NoInputNoOutput agent and marks it trusted; a second pair says it was paired already; stream --ecg then
# streams ECG at once, without pairing on demand.
. "$(dirname "$0")/lib.sh"
bond_paths
# A removed device's path still introspects (as an empty node); its properties are gone.
known() { busprop "$1" org.bluez.Device1 Address >/dev/null; }
check_bonded bonded-both-sides
drop_link

check unpair-removes sh -c "'$HR_BIN' unpair '$addr' --adapter '$central' 2>&1 | grep 'Removed'"
# bluetoothd drops the device object once the removal is through, not always before RemoveDevice returns.
forgotten() { ! known "$strap_dev"; }
if wait_until 20 forgotten; then pass gateway-forgot
else fail gateway-forgot "$strap_dev still there, Paired: $(busprop "$strap_dev" org.bluez.Device1 Paired)"; fi
check unpair-again-has-nothing-to-remove sh -c "'$HR_BIN' unpair '$addr' --adapter '$central' 2>&1 | grep 'nothing to remove'"
strap_forgets

"$HR_BIN" pair "$addr" --adapter "$central" --timeout 60 >"$OUT/pair-1.txt" 2>&1
check pair-pairs sh -c "grep 'Paired with' '$OUT/pair-1.txt' || { cat '$OUT/pair-1.txt'; false; }"
check_bonded paired-both-sides
check trusted sh -c "busctl --system get-property org.bluez '$strap_dev' org.bluez.Device1 Trusted | grep -q true"
"$HR_BIN" pair "$addr" --adapter "$central" --timeout 60 >"$OUT/pair-2.txt" 2>&1
check pair-again-says-so sh -c "grep 'was paired already' '$OUT/pair-2.txt' || { cat '$OUT/pair-2.txt'; false; }"

ev=$OUT/pair.jsonl rec=$OUT/pair-record.jsonl
start_stream "$ev" "$rec" --strap "$addr" --adapter "$central" --ecg --window 60 --emit-interval 5
if wait_line 90 "$ev" 'ECG streaming at 130 Hz'; then pass ecg-started
else fail ecg-started "$(grep sensor_status "$ev" | tail -n4 | tr '\n' ' ') $(tail -c 300 "$ev.err")"; fi
wait_count 30 "$rec" '"ecg_uv"' 5
stop_pid "$STREAM_PID"
check no-pairing-on-demand sh -c "! grep -o 'pairing with the strap[^\"]*' '$ev'"
check ecg-exactly-once-in-order $CHECK ecg "$rec" "$LANE_ECG" 300
finish_scenario
