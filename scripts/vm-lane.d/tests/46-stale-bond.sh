# A strap that has forgotten its pairing (an H10 paired with a phone since, or reset) while BlueZ on the gateway
# still holds the old keys: after 45-ecg both sides are bonded; the emulator's side removes the central, so it has no
# key for the link. stream --ecg must say what happened, remove the stale bond, pair afresh with no user action, and
# stream ECG again.
#
# Not in the default run (scripts/vm-lane-tests): when the encrypted connect to the strap fails, the lane's guest
# kernel (Debian 6.1.0-56) oopses in hci_chan_del (list corruption; upstream "Bluetooth: L2CAP: Fix corrupted list
# in hci_chan_del") and bluetoothd dies with it. The 6.12 kernel bookworm also ships boots in the lane
# (VM_LANE_KERNEL=6.12.117+deb12-amd64) but BlueZ 5.66 does not resolve services there. Run it with
# VM_LANE_TESTS_ONLY="45-ecg.sh 46-stale-bond.sh" on a guest kernel with the fix. The behaviour it checks is covered
# against the fake bluetoothd, which answers Connect as bluetoothd 5.66 does here (le-connection-abort-by-local).
. "$(dirname "$0")/lib.sh"
bond_paths
check_bonded bonded-both-sides
# The strap forgets: its side drops the bond (keys and all), once the link is down.
drop_link
strap_forgets
ev=$OUT/stale-bond.jsonl rec=$OUT/stale-bond-record.jsonl
start_stream "$ev" "$rec" --strap "$addr" --adapter "$central" --ecg --window 60 --emit-interval 5
if wait_line 120 "$ev" 'ECG streaming at 130 Hz'; then pass ecg-after-repairing
else fail ecg-after-repairing "$(grep sensor_status "$ev" | tail -n6 | tr '\n' ' ') $(tail -c 400 "$ev.err")"; fi
wait_count 30 "$rec" '"ecg_uv"' 5
stop_pid "$STREAM_PID"
check said-refused grep -m1 -o "refuses this computer's pairing[^\"]*" "$ev"
check paired-again sh -c "busctl --system get-property org.bluez $strap_dev org.bluez.Device1 Paired | grep -q true"
check ecg-exactly-once-in-order $CHECK ecg "$rec" "$LANE_ECG" 300
finish_scenario
