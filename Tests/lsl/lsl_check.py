"""`stream --lsl` received by pylsl's StreamInlet, an independent Lab Streaming Layer consumer (the liblsl that pylsl's
wheel carries is the one the gateway loads, through HR_GATEWAY_LIBLSL).

Replays a recording with a strap's readings (HR and RR) and raw ECG chunks (a real ECG excerpt,
Tests/Fixtures/ecg_mitbih208_130hz.csv, as `stream --ecg` records it) with `--lsl` and a breathing pattern, resolves the
gateway's markers, HR, RR and ECG streams, checks that the markers are the session's events as printed, stamped at
their times, and checks their metadata (type, rate, unit, source id), that every sample pushed after the inlet
connected arrives once and in order (LSL gives a consumer what is pushed after it connects), that ECG time stamps
follow the strap's real rate (128.6 Hz, the nominal 130 Hz
declared) and RR time stamps the beats, and that `doctor` reports liblsl; also that without liblsl `--lsl` says
how to get it. Prints 'N passed, N failed'; exits non-zero on any failure.
Usage: python3 lsl_check.py PATH/TO/hr-gateway
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from report import Report  # noqa: E402

import pylsl
from pylsl.util import LostError

BINARY = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".build/debug/hr-gateway")
LIBLSL = os.path.join(os.path.dirname(pylsl.__file__), "lib", "liblsl.so")
DEVICE = "A0:9E:1A:00:00:02"
FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Fixtures", "ecg_mitbih208_130hz.csv")
HR_ONLY_SEC, ECG_SEC = 4, 10
# The strap's real ECG rate: a Polar H10's "130 Hz" is 128-131 Hz (docs/pmd.md, "Sample rate"); it says 130.
STRAP_HZ = 128.6


def recording(path):
    with open(FIXTURE) as fh:
        ecg = [int(v) for v in fh.read().split()[1:]][:130 * ECG_SEC]
    t0 = 1_700_000_000_000
    lines, hr, rr = [], [], []
    for sec in range(HR_ONLY_SEC + ECG_SEC + 1):
        bpm = 60 + sec % 5
        beat = round(60000 / bpm)
        lines.append({"timestamp_ms": t0 + 1000 * sec, "bpm": bpm, "rr_intervals_ms": [beat], "device_id": DEVICE,
                      "source": "ble_hrm", "contact": "contact"})
        hr.append(bpm)
        rr.append(beat)
    start = t0 + 1000 * HR_ONLY_SEC
    for i in range(0, len(ecg), 73):
        lines.append({"timestamp_ms": start + round(i * 1000 / STRAP_HZ), "bpm": 0, "device_id": DEVICE,
                      "source": "polar_ecg", "ecg_uv": ecg[i:i + 73], "ecg_rate_hz": 130})
    # Accelerometer chunks at 50 Hz (synthetic values: this checks transport, not motion).
    acc = [[(i % 50 - 25) / 1000, ((i * 7) % 31 - 15) / 1000, (1000 - i % 3) / 1000] for i in range(50 * ECG_SEC)]
    for i in range(0, len(acc), 36):
        lines.append({"timestamp_ms": start + round(i * 1000 / 50), "bpm": 0, "device_id": DEVICE,
                      "source": "polar_acc", "acc_g": acc[i:i + 36], "acc_rate_hz": 50})
    lines.sort(key=lambda x: x["timestamp_ms"])
    with open(path, "w") as fh:
        fh.write("".join(json.dumps(x) + "\n" for x in lines))
    return hr, rr, ecg, acc


def is_suffix(got, sent):
    return len(got) > 0 and got == sent[len(sent) - len(got):]


def main():
    work = tempfile.mkdtemp(prefix="lsl-check-")
    report = Report()
    check = report.check

    env = dict(os.environ, HR_GATEWAY_LIBLSL=LIBLSL)
    try:
        rec = os.path.join(work, "rec.jsonl")
        hr_sent, rr_sent, ecg_sent, acc_sent = recording(rec)
        gw = subprocess.Popen(
            [BINARY, "stream", "--replay", rec, "--lsl", "--pattern", "2-1-2-0", "--format", "jsonl", "--no-record-db",
             "--state-dir", work, "--gateway-id", "lab-2"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        inlets = {}
        for kind in ("markers", "hr", "rr", "ecg", "accelerometer"):
            found = (pylsl.resolve_byprop("source_id", "hr-gateway:lab-2:markers", timeout=HR_ONLY_SEC + 6)
                     if kind == "markers"
                     else pylsl.resolve_byprop("source_id", f"hr-gateway:{DEVICE}:{kind}", timeout=HR_ONLY_SEC + 6))
            assert found, f"no {kind} stream resolved; gateway stderr: {gw.stderr.read() if gw.poll() is not None else ''}"
            inlet = pylsl.StreamInlet(found[0], max_buflen=60, recover=False)
            inlet.open_stream(timeout=5)
            inlets[kind] = (found[0], inlet)
        got = {k: ([], []) for k in inlets}
        infos = {k: inlet.info(timeout=5) for k, (_, inlet) in inlets.items()}
        lost = set()

        def pull(kind, inlet, timeout):
            # When the gateway ends its outlets, the inlet reports the stream lost after what it had received.
            try:
                samples, stamps = inlet.pull_chunk(timeout=timeout)
            except LostError:
                lost.add(kind)
                return
            got[kind][0].extend(s if len(s) > 1 else s[0] for s in samples)
            got[kind][1].extend(stamps)

        deadline = time.monotonic() + HR_ONLY_SEC + ECG_SEC + 15
        while time.monotonic() < deadline and len(lost) < len(inlets):
            for kind, (_, inlet) in inlets.items():
                if kind not in lost:
                    pull(kind, inlet, 0.2)
            if gw.poll() is not None:
                # The replay ended: take what is still in flight.
                for kind, (_, inlet) in inlets.items():
                    if kind not in lost:
                        pull(kind, inlet, 1.0)
                break
        out = gw.stdout.read()
        code = gw.wait(timeout=30)
        err = gw.stderr.read()

        def metadata():
            assert code == 0, f"the gateway exited {code}: {err}"
            assert "lsl: publishing with liblsl" in err, err
            for kind, unit, type_, rate, n in (("hr", "bpm", "HeartRate", 0, 1), ("rr", "ms", "RR", 0, 1),
                                               ("ecg", "microvolts", "ECG", 130, 1),
                                               ("accelerometer", "g", "Accelerometer", 50, 3)):
                info = infos[kind]
                assert info.type() == type_ and info.nominal_srate() == rate and info.channel_count() == n, \
                    (kind, info.type(), info.nominal_srate(), info.channel_count())
                ch = info.desc().child("channels").child("channel")
                assert ch.child_value("unit") == unit, (kind, ch.child_value("unit"))
                assert info.desc().child("acquisition").child_value("device_id") == DEVICE

        def ecg_exact():
            values, stamps = got["ecg"]
            assert len(values) >= 130 * (ECG_SEC - 3), f"only {len(values)} ECG samples received"
            assert is_suffix([int(v) for v in values], ecg_sent), \
                f"the ECG received is not the end of what was sent, whole and in order ({len(values)} samples)"
            steps = [b - a for a, b in zip(stamps, stamps[1:])]
            # Chunks join one period apart, the strap's real period once the gateway has measured it (from its
            # third chunk; 1/130 s would be 0.084 ms short), and a restart at a chunk's own time would step
            # (RegularStamps slews at most 2 ms per s, 0.016 ms per sample).
            assert all(abs(d - 1 / STRAP_HZ) < 0.00005 for d in steps[2 * 73:]), \
                f"ECG time stamps not 1/{STRAP_HZ} s apart: {min(steps):.6f}..{max(steps):.6f}"
            # Each stamp is its sample's real time, but for one offset (the replay's start on LSL's clock): what
            # built up while the rate was not yet measured (about 10 ms) is slewed out, then only the millisecond
            # rounding of the chunks' times is left.
            first = len(ecg_sent) - len(values)
            offsets = [t - (first + j) / STRAP_HZ for j, t in enumerate(stamps)]
            late = offsets[len(offsets) * 3 // 4:]
            assert max(offsets) - min(offsets) < 0.025 and max(late) - min(late) < 0.004, \
                f"ECG stamps off their samples' times by {1000 * (max(offsets) - min(offsets)):.1f} ms " \
                f"({1000 * (max(late) - min(late)):.1f} ms over the last quarter)"

        def accelerometer():
            values, stamps = got["accelerometer"]
            assert len(values) >= 50 * (ECG_SEC - 3), f"only {len(values)} accelerometer samples received"
            rounded = [[round(v, 6) for v in s] for s in values]
            assert is_suffix(rounded, [[round(v, 6) for v in a] for a in acc_sent]), "accelerometer samples differ"
            steps = [b - a for a, b in zip(stamps, stamps[1:])]
            assert all(abs(d - 1 / 50) < 0.0002 for d in steps), f"not 1/50 s apart: {min(steps):.5f}..{max(steps):.5f}"

        def hr_and_rr():
            hr, hr_t = got["hr"]
            rr, rr_t = got["rr"]
            assert len(hr) >= ECG_SEC and is_suffix([int(v) for v in hr], hr_sent), f"HR {hr} vs {hr_sent}"
            assert len(rr) >= ECG_SEC and is_suffix([round(v) for v in rr], rr_sent), f"RR {rr} vs {rr_sent}"
            assert all(abs((b - a) - 1.0) < 0.002 for a, b in zip(hr_t, hr_t[1:])), "HR stamps not 1 s apart"
            # Each beat ends at its notification (one a second here).
            assert all(abs((b - a) - 1.0) < 0.002 for a, b in zip(rr_t, rr_t[1:])), "RR stamps not at the beats"

        def markers():
            info = infos["markers"]
            assert info.channel_format() == pylsl.cf_string and info.channel_count() == 1 \
                and info.nominal_srate() == 0, (info.channel_format(), info.channel_count(), info.nominal_srate())
            # --gateway-id names the gateway: two on one host publish markers a recorder tells apart.
            assert info.source_id() == "hr-gateway:lab-2:markers" and info.name() == "hr-gateway lab-2 Markers" \
                and info.type() == "Markers", (info.source_id(), info.name())
            texts, stamps = got["markers"]
            printed = [line for line in out.splitlines()
                       if json.loads(line)["type"] not in ("session_frame", "biosignal_frame")]
            # The first event, pushed before any inlet could connect, is in the stream's description.
            acq = info.desc().child("acquisition")
            assert acq.child_value("session_started") == printed[0], (acq.child_value("session_started"), printed[0])
            assert acq.child_value("session_id") == json.loads(printed[0])["session_id"], acq.child_value("session_id")
            # Each marker is an event as printed, byte for byte; those pushed after the inlet connected, in order.
            assert len(texts) >= 5 and is_suffix(texts, printed), \
                f"{len(texts)} markers, not the end of the {len(printed)} events printed: {texts[:2]}"
            events = [json.loads(t) for t in texts]
            assert events[-1]["type"] == "session_summary", events[-1]["type"]
            cues = [(e["starts_at_ms"], s) for e, s in zip(events, stamps) if e["type"] == "breathing_cue"]
            assert len(cues) >= 4, f"only {len(cues)} breathing cues"
            # Stamped at each phase's start: the stamps are as far apart as the phases.
            for (a_ms, a), (b_ms, b) in zip(cues, cues[1:]):
                assert abs((b - a) - (b_ms - a_ms) / 1000) < 0.005, f"cue stamps {b - a:.4f} s apart, phases {b_ms - a_ms} ms"

        def doctor():
            d = subprocess.run([BINARY, "doctor", "--state-dir", work], capture_output=True, text=True, env=env, timeout=60)
            line = next((l for l in d.stdout.splitlines() if "Lab Streaming" in l), "")
            assert line.startswith("ok") and LIBLSL in line, line or d.stdout
            missing = dict(env, HR_GATEWAY_LIBLSL="/nonexistent/liblsl.so")
            r = subprocess.run([BINARY, "stream", "--simulate", "--lsl", "--duration", "1", "--state-dir", work],
                               capture_output=True, text=True, env=missing, timeout=60)
            # A wrong HR_GATEWAY_LIBLSL is named as what to fix (not "install pylsl", which is installed).
            assert r.returncode != 0 and "HR_GATEWAY_LIBLSL=/nonexistent/liblsl.so did not load" in r.stderr \
                and "or unset it" in r.stderr, r.stderr
            d = subprocess.run([BINARY, "doctor", "--state-dir", work], capture_output=True, text=True, env=missing,
                               timeout=60)
            line = next((l for l in d.stdout.splitlines() if "Lab Streaming" in l), "")
            assert line.startswith("warn") and "HR_GATEWAY_LIBLSL=/nonexistent/liblsl.so did not load" in line, line

        check("HR, RR, ECG and accelerometer streams with their type, rate, channels, unit and device", metadata)
        check("every ECG sample after the inlet connected arrives once, in order, at the strap's real rate", ecg_exact)
        check("every accelerometer sample (X, Y, Z in g) after the inlet connected, once, in order, 1/50 s apart",
              accelerometer)
        check("HR and RR arrive once, in order, stamped at their readings and beats", hr_and_rr)
        check("the session's events (but frames) on a Markers stream, each as printed, stamped at its time; "
              "session_started in its description", markers)
        check("doctor reports liblsl; a wrong HR_GATEWAY_LIBLSL is named by --lsl and doctor", doctor)
    except Exception as e:
        report.setup_failed(e)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report.summary()


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
