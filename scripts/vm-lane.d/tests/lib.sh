# Shared helpers of the lane's gateway tests (sourced by each scenario script; runs in the guest).
# Every wait polls a condition until a deadline; nothing sleeps a fixed time for synchronisation.
# shellcheck shell=bash
: "${HR_BIN:?HR_BIN (the hr-gateway binary) must be passed with --env}"
: "${LANE_TESTS:?LANE_TESTS (scripts/vm-lane.d/tests) must be passed with --env}"
PY=/usr/bin/python3
CHECK="$PY $LANE_TESTS/check.py"
OUT=${VM_LANE_OUT:-/out}/lane-tests
mkdir -p "$OUT"
SCENARIO=${SCENARIO:-$(basename "$0" .sh)}

now() { date +%s.%N; }
T0=$(now)
elapsed() { awk -v a="$T0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
pass() { echo "PASS $SCENARIO/$1 ($(elapsed) s)${2:+ — $2}"; }
fail() { echo "FAIL $SCENARIO/$1 ($(elapsed) s)${2:+ — $2}"; FAILED=1; }
FAILED=0
# check NAME CMD...: PASS when CMD succeeds (its output is the detail), FAIL otherwise.
check() {
    local name=$1 out; shift
    if out=$("$@" 2>&1); then pass "$name" "$(tail -n1 <<<"$out")"; else fail "$name" "$(tr '\n' ' ' <<<"$out" | tail -c 600)"; fi
}

# wait_until SECONDS CMD...: polls CMD every 0.2 s until it succeeds; returns 1 after SECONDS.
wait_until() {
    local deadline; deadline=$(awk -v t="$(now)" -v s="$1" 'BEGIN { printf "%d", t + s }'); shift
    until "$@" >/dev/null 2>&1; do
        [ "$(date +%s)" -ge "$deadline" ] && return 1
        sleep 0.2
    done
}
# wait_line SECONDS FILE REGEX: waits until a line of FILE matches REGEX (grep -E).
wait_line() { wait_until "$1" grep -qE -- "$3" "$2"; }
# wait_count SECONDS FILE REGEX N: waits until N lines of FILE match REGEX.
count_ge() { [ "$(grep -cE -- "$2" "$1" 2>/dev/null)" -ge "$3" ]; }
wait_count() { wait_until "$1" count_ge "$2" "$3" "$4"; }

# stop_pid PID [SECONDS]: SIGTERM, then wait for it to exit (SIGKILL after SECONDS, default 20).
stop_pid() {
    local pid=$1 limit=${2:-20}
    kill -TERM "$pid" 2>/dev/null || return 0
    wait_until "$limit" sh -c "! kill -0 $pid" || kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null || true
}

busprop() { busctl --system get-property org.bluez "$1" "$2" "$3" 2>/dev/null; }
adapter_address() { busprop "/org/bluez/$1" org.bluez.Adapter1 Address | awk -F'"' '{print $2}'; }
set_powered() { busctl --system set-property org.bluez "/org/bluez/$1" org.bluez.Adapter1 Powered b "$2"; }
advertising() { [ "$(busprop "/org/bluez/$1" org.bluez.LEAdvertisingManager1 ActiveInstances | awk '{print $2}')" -gt 0 ] 2>/dev/null; }
adapter_ready() {
    local a=/org/bluez/$1 list
    list=$(busctl --system introspect --list org.bluez "$a" 2>/dev/null) || return 1
    grep -q '^org.bluez.Adapter1 ' <<<"$list" && grep -q '^org.bluez.GattManager1 ' <<<"$list" \
        && grep -q '^org.bluez.LEAdvertisingManager1 ' <<<"$list"
}
device_connected() {
    local path; path=/org/bluez/$1/dev_$(tr ':' '_' <<<"$2")
    [ "$(busprop "$path" org.bluez.Device1 Connected)" = "b true" ]
}

# le_only ADAPTER: turns BR/EDR off on ADAPTER (powered off for the change, then on again) and checks it is off.
le_only() {
    local i=${1#hci}
    btmgmt --index "$i" power off >/dev/null && btmgmt --index "$i" bredr off >/dev/null \
        && btmgmt --index "$i" power on >/dev/null || return 1
    ! btmgmt --index "$i" info | grep -m1 'current settings' | grep -qw 'br/edr'
}

# emulator_pid ADAPTER: the emulate-strap advertising on ADAPTER (the lane's peripheral or one we started).
emulator_pid() { pgrep -f "emulate-strap --adapter $1( |\$)" | head -n1; }
# start_emulator ADAPTER NAME LOG: starts emulate-strap as the lane does and waits until it advertises.
start_emulator() {
    "$HR_BIN" emulate-strap --adapter "$1" --name "$2" --rr "$LANE_RR" >"$3" 2>&1 &
    wait_line 60 "$3" '^advertising' && wait_until 30 advertising "$1"
}

# start_stream LOG RECORD ARGS...: hr-gateway stream in the background (jsonl, --raw, --record); sets STREAM_PID.
start_stream() {
    local log=$1 record=$2; shift 2
    "$HR_BIN" stream --format jsonl --raw --record "$record" "$@" >"$log" 2>"$log.err" &
    STREAM_PID=$!
}

# bond_paths: the bond between the gateway (the central adapter) and the emulated strap on hci0 (46-stale-bond,
# 47-pair). Sets central, addr (the strap's address), central_addr, strap_dev (the strap as the gateway's side sees
# it) and central_dev (the gateway as the strap's side sees it).
bond_paths() {
    central=$VM_LANE_CENTRAL_ADAPTER
    addr=$(adapter_address hci0)
    central_addr=$(adapter_address "$central")
    strap_dev=/org/bluez/$central/dev_$(tr ':' '_' <<<"$addr")
    central_dev=/org/bluez/hci0/dev_$(tr ':' '_' <<<"$central_addr")
}
paired() { [ "$(busprop "$1" org.bluez.Device1 Paired)" = "b true" ]; }
# check_bonded NAME: PASS when both sides hold the bond.
check_bonded() {
    if paired "$strap_dev" && paired "$central_dev"; then pass "$1"
    else fail "$1" "gateway side: $(busprop "$strap_dev" org.bluez.Device1 Paired); strap side: $(busprop "$central_dev" org.bluez.Device1 Paired)"; fi
}
# drop_link: the gateway's side disconnects the strap, and the link is waited down on both sides. It comes before
# any removal: removing a connected device made this guest kernel (6.1) oops in hci_chan_del.
link_down() { ! device_connected "$central" "$addr" && ! device_connected hci0 "$central_addr"; }
drop_link() {
    busctl --system call org.bluez "$strap_dev" org.bluez.Device1 Disconnect >/dev/null 2>&1
    wait_until 30 link_down || fail link-down "the link between the gateway and the strap stays up"
}
# strap_forgets: the strap's side removes the gateway, keys and all, as a strap reset or paired elsewhere does.
strap_forgets() {
    busctl --system call org.bluez /org/bluez/hci0 org.bluez.Adapter1 RemoveDevice o "$central_dev" \
        && pass strap-forgets || fail strap-forgets "RemoveDevice $central_dev failed"
}

finish_scenario() { exit "$FAILED"; }
