# A strap that has forgotten its pairing (an H10 paired with a phone since, or reset) while BlueZ on the gateway
# still holds the old keys: after 45-ecg both sides are bonded; the emulator's side removes the central, so it has no
# key for the link. stream --ecg must say what happened, remove the stale bond, pair afresh with no user action, and
# stream ECG again.
. "$(dirname "$0")/lib.sh"
central=$VM_LANE_CENTRAL_ADAPTER
addr=$(adapter_address hci0)
central_addr=$(adapter_address "$central")
strap_dev=/org/bluez/$central/dev_$(tr ':' '_' <<<"$addr")
central_dev=/org/bluez/hci0/dev_$(tr ':' '_' <<<"$central_addr")
paired() { [ "$(busprop "$1" org.bluez.Device1 Paired)" = "b true" ]; }
if paired "$strap_dev" && paired "$central_dev"; then pass bonded-both-sides
else fail bonded-both-sides "gateway side: $(busprop "$strap_dev" org.bluez.Device1 Paired); strap side: $(busprop "$central_dev" org.bluez.Device1 Paired)"; fi
# The strap forgets: its side drops the bond (keys and all).
busctl --system call org.bluez /org/bluez/hci0 org.bluez.Adapter1 RemoveDevice o "$central_dev" \
    && pass strap-forgets || fail strap-forgets "RemoveDevice $central_dev failed"
ev=$OUT/stale-bond.jsonl rec=$OUT/stale-bond-record.jsonl
start_stream "$ev" "$rec" --strap "$addr" --adapter "$central" --ecg --window 60 --emit-interval 5
if wait_line 120 "$ev" 'ECG streaming at 130 Hz'; then pass ecg-after-repairing
else fail ecg-after-repairing "$(grep sensor_status "$ev" | tail -n6 | tr '\n' ' ') $(tail -c 400 "$ev.err")"; fi
wait_count 30 "$rec" '"ecg_uv"' 5
stop_pid "$STREAM_PID"
check said-forgotten grep -m1 -o 'forgotten its pairing[^"]*' "$ev" "$ev.err"
check paired-again sh -c "busctl --system get-property org.bluez $strap_dev org.bluez.Device1 Paired | grep -q true"
check ecg-exactly-once-in-order $CHECK ecg "$rec" "$LANE_ECG" 300
finish_scenario
