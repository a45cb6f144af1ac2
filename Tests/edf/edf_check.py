"""`sessions export --format edf` read back by an independent reader, pyedflib (EDFlib's Python binding).

Records a paced breathing session over the simulated strap (`stream --simulate --pattern 2-1-2-0 --duration 20`),
exports it as EDF+ and as CSV with the built binary, and checks with pyedflib that the file opens as EDF+C, that the
start is the session's start (whole second, UTC; or its first beat's, when earlier), that the HR signal is 1 Hz and
each second holds the newest strap reading at or before it (as the events printed by the session say), that every
beat of the CSV export is a `beat` annotation at its time (to the millisecond), and that every breathing cue is an
annotation with its phase, start and duration. Then replays a recording holding raw ECG chunks (a real ECG excerpt, Tests/Fixtures/ecg_mitbih208_130hz.csv,
as `stream --ecg` records it from a Polar strap) and checks that the export's ECG channel (130 Hz, µV) holds every
sample at its place, and that two straps' ECG are two channels, each holding its strap's samples alone. Prints
'N passed, N failed'; exits non-zero on any failure.
Usage: python3 edf_check.py PATH/TO/hr-gateway
"""

import csv
import datetime
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from report import Report  # noqa: E402

import pyedflib

BINARY = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".build/debug/hr-gateway")


def run(args):
    r = subprocess.run([BINARY] + args, capture_output=True, timeout=120)
    assert r.returncode == 0, f"hr-gateway {' '.join(args)} exited {r.returncode}: {r.stderr.decode()}"
    return r.stdout


FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Fixtures", "ecg_mitbih208_130hz.csv")


def fixture_ecg(seconds):
    """The first `seconds` of the real ECG excerpt (µV at 130 Hz)."""
    with open(FIXTURE) as fh:
        return [int(v) for v in fh.read().split()[1:]][:130 * seconds]


def replay_and_export(work, lines, session_id):
    """Records `lines` (sample objects, in time order) as session `session_id` through `stream --replay` at 20x,
    exports it as EDF; returns the EDF's path."""
    rec = os.path.join(work, session_id + ".jsonl")
    with open(rec, "w") as fh:
        fh.write("".join(json.dumps(x) + "\n" for x in lines))
    run(["stream", "--replay", rec, "--replay-speed", "20", "--format", "jsonl", "--session-id", session_id,
         "--state-dir", work])
    path = os.path.join(work, session_id + ".edf")
    run(["sessions", "export", session_id, "--format", "edf", "--output", path, "--state-dir", work])
    return path


def main():
    work = tempfile.mkdtemp(prefix="edf-check-")
    report = Report()
    check = report.check

    try:
        events = [json.loads(l) for l in run(
            ["stream", "--simulate", "--pattern", "2-1-2-0", "--duration", "20", "--raw", "--format", "jsonl",
             "--session-id", "edf-check", "--state-dir", work]).decode().splitlines()]
        edf_path = os.path.join(work, "s.edf")
        run(["sessions", "export", "edf-check", "--format", "edf", "--output", edf_path, "--state-dir", work])
        beats = list(csv.DictReader(io.StringIO(
            run(["sessions", "export", "edf-check", "--format", "csv", "--state-dir", work]).decode())))
        started = next(e for e in events if e["type"] == "session_started")["started_at_ms"]
        # The whole second at or before the session's start, or its first beat (a strap's first notification
        # carries beats that ended before it) or sample when earlier.
        first_sample = min(s["timestamp_ms"] for e in events if e["type"] == "biosignal_frame" for s in e["samples"])
        start_ms = min([started, first_sample] + [int(b["beat_time_ms"]) for b in beats]) // 1000 * 1000
        f = pyedflib.EdfReader(edf_path)
        onsets, durations, texts = f.readAnnotations()
        notes = list(zip(onsets, durations, texts))

        def header():
            assert f.filetype == pyedflib.FILETYPE_EDFPLUS, f"file type {f.filetype}, not EDF+"
            assert f.getSignalLabels() == ["HR"], f.getSignalLabels()
            assert list(f.getSampleFrequencies()) == [1.0], f.getSampleFrequencies()
            assert f.getPhysicalDimension(0) == "bpm", f.getPhysicalDimension(0)
            want = datetime.datetime.fromtimestamp(start_ms / 1000, datetime.timezone.utc).replace(tzinfo=None)
            assert f.getStartdatetime() == want, f"start {f.getStartdatetime()}, expected {want} UTC"
            assert f.getFileDuration() >= 20, f"{f.getFileDuration()} s"

        def heart_rate():
            hr = f.readSignal(0)
            samples = sorted({(s["timestamp_ms"], s["bpm"]) for e in events if e["type"] == "biosignal_frame"
                              for s in e["samples"]})
            assert len(samples) >= 15, f"{len(samples)} samples printed"
            checked = 0
            newest = samples[-1][0]
            for second, value in enumerate(hr):
                t = start_ms + 1000 * second
                if t > newest:
                    break   # a reading recorded after the last raw frame printed is not known here
                before = [bpm for ts, bpm in samples if ts <= t and t - ts <= 5000]
                if not before:
                    continue
                assert abs(value - before[-1]) < 0.006, f"second {second}: EDF {value}, newest reading {before[-1]}"
                checked += 1
            assert checked >= 15, f"only {checked} seconds compared"

        def beat_annotations():
            got = [round(o * 1000) for o, _, t in notes if t == "beat"]
            want = [int(b["beat_time_ms"]) - start_ms for b in beats]
            assert len(want) >= 15, f"{len(want)} beats in the CSV"
            assert got == want, f"beat annotations (ms) {got[:6]}… vs CSV {want[:6]}… ({len(got)} vs {len(want)})"

        def cue_annotations():
            cues = [e for e in events if e["type"] == "breathing_cue"]
            assert len(cues) >= 9, f"{len(cues)} cues"
            got = [(round(o * 1000), round(d * 1000), t) for o, d, t in notes if t in ("inhale", "hold", "exhale")]
            want = [(c["starts_at_ms"] - start_ms, c["phase_duration_ms"], c["phase"]) for c in cues]
            assert got == want, f"{got[:4]} vs {want[:4]}"
            texts_seen = {t for _, _, t in notes}
            assert {"session started", "session ended"} <= texts_seen, texts_seen

        def ecg_channel():
            ecg = fixture_ecg(20)
            t0 = 1_700_000_000_250
            lines = []
            for sec in range(20):
                lines.append({"timestamp_ms": t0 + 1000 * sec + 900, "bpm": 60, "rr_intervals_ms": [1000],
                              "device_id": "A0:9E:1A:00:00:02", "source": "ble_hrm", "contact": "contact"})
            for start in range(0, len(ecg), 73):
                lines.append({"timestamp_ms": t0 + round(start * 1000 / 130), "bpm": 0,
                              "device_id": "A0:9E:1A:00:00:02", "source": "polar_ecg",
                              "ecg_uv": ecg[start:start + 73], "ecg_rate_hz": 130})
            # Accelerometer chunks at 50 Hz (synthetic values: this checks placement and scale, not motion).
            acc = [[(i % 50 - 25) / 1000, ((i * 7) % 31 - 15) / 1000, (1000 - i % 3) / 1000] for i in range(50 * 20)]
            for start in range(0, len(acc), 36):
                lines.append({"timestamp_ms": t0 + round(start * 1000 / 50), "bpm": 0,
                              "device_id": "A0:9E:1A:00:00:02", "source": "polar_acc",
                              "acc_g": acc[start:start + 36], "acc_rate_hz": 50})
            lines.sort(key=lambda x: x["timestamp_ms"])
            path = replay_and_export(work, lines, "edf-ecg")
            g = pyedflib.EdfReader(path)
            try:
                assert g.getSignalLabels() == ["HR", "ECG", "Acc X", "Acc Y", "Acc Z"], g.getSignalLabels()
                for axis in range(3):
                    assert g.getSampleFrequency(2 + axis) == 50 and g.getPhysicalDimension(2 + axis) == "g"
                    got_acc = list(g.readSignal(2 + axis))
                    first_acc = next(i for i, v in enumerate(got_acc) if abs(v) > 1e-3) if axis == 2 else None
                    if axis == 2:
                        step = 32 / 65535
                        values = [a[2] for a in acc]
                        assert all(abs(x - y) <= step for x, y in zip(got_acc[first_acc:first_acc + len(acc)], values)), \
                            "accelerometer Z differs from the recording beyond one digital step"
                assert g.getSampleFrequency(1) == 130 and g.getPhysicalDimension(1) == "uV", \
                    (g.getSampleFrequency(1), g.getPhysicalDimension(1))
                shown = [int(round(v)) for v in g.readSignal(1)]
                # The replay shifts times to its start; the ECG must appear once, whole and in order.
                first = next(i for i, v in enumerate(shown) if v != 0)
                assert ecg[0] != 0, "the check finds the recording by its first sample, which must not be 0"
                got = shown[first:first + len(ecg)]
                assert got == ecg, f"ECG in the EDF differs from the recording from sample {next((i for i, (a, b) in enumerate(zip(got, ecg)) if a != b), len(got))}"
                assert all(v == 0 for v in shown[first + len(ecg):]), "samples after the recording"
                # The per-sample CSV export puts every sample where the EDF has it: its time, on the EDF's 130 Hz
                # grid from the file's start, is within half a sample of the EDF's place for it (the EDF rounds the
                # first chunk's time to its grid; the CSV keeps it), by the same offset for every sample.
                edf_start_ms = g.getStartdatetime().replace(tzinfo=datetime.timezone.utc).timestamp() * 1000
                rows = list(csv.DictReader(io.StringIO(run(["sessions", "export", "edf-ecg", "--format", "ecg-csv",
                                                            "--state-dir", work]).decode())))
                assert [int(r["ecg_uv"]) for r in rows] == ecg, "ecg-csv does not hold the recording, once, in order"
                at = [(float(r["time_ms"]) - edf_start_ms) * 130 / 1000 for r in rows]
                offsets = [a - round(a) for a in at]
                assert all(abs(o) <= 0.5 and abs(o - offsets[0]) < 1e-3 for o in offsets), \
                    f"ecg-csv times are not on the EDF's grid with one offset: {at[:3]}"
                assert [shown[round(a)] for a in at] == ecg, "ecg-csv times do not point at the EDF's samples"
                acc_rows = list(csv.DictReader(io.StringIO(run(["sessions", "export", "edf-ecg", "--format", "acc-csv",
                                                                "--state-dir", work]).decode())))
                assert [[float(r["x_g"]), float(r["y_g"]), float(r["z_g"])] for r in acc_rows] == acc, \
                    "acc-csv does not hold the recording's accelerometer"
            finally:
                g.close()

        def two_straps():
            # Two straps with --ecg in one session (a team, a lab comparing placements): each its own numbered
            # signals, the device in the transducer field, each ECG channel holding its strap's samples alone.
            ecg = fixture_ecg(8)
            straps = {"A0:9E:1A:00:00:0A": (ecg, 62, 5), "A0:9E:1A:00:00:0B": ([-v for v in ecg], 75, 17)}
            t0 = 1_700_000_100_000
            lines = []
            for device, (values, bpm, lag) in straps.items():
                for sec in range(9):
                    lines.append({"timestamp_ms": t0 + 1000 * sec + lag, "bpm": bpm, "rr_intervals_ms": [round(60000 / bpm)],
                                  "device_id": device, "source": "ble_hrm", "contact": "contact"})
                for start in range(0, len(values), 73):
                    lines.append({"timestamp_ms": t0 + 400 + lag + round(start * 1000 / 130), "bpm": 0,
                                  "device_id": device, "source": "polar_ecg", "ecg_uv": values[start:start + 73],
                                  "ecg_rate_hz": 130})
            lines.sort(key=lambda x: x["timestamp_ms"])
            path = replay_and_export(work, lines, "edf-two")
            g = pyedflib.EdfReader(path)
            try:
                assert g.getSignalLabels() == ["HR 1", "HR 2", "ECG 1", "ECG 2"], g.getSignalLabels()
                for k, (device, (values, bpm, _)) in enumerate(straps.items()):
                    assert g.getTransducer(k).endswith(device) and g.getTransducer(2 + k).endswith(device), \
                        (g.getTransducer(k), g.getTransducer(2 + k))
                    hr = [v for v in g.readSignal(k) if v != 0]
                    assert len(hr) >= 6 and all(abs(v - bpm) < 0.006 for v in hr), f"HR {k + 1}: {hr}"
                    assert g.getSampleFrequency(2 + k) == 130, g.getSampleFrequency(2 + k)
                    shown = [int(round(v)) for v in g.readSignal(2 + k)]
                    got = [v for v in shown if v != 0]
                    assert got == [v for v in values if v != 0], \
                        f"ECG {k + 1} is not strap {device}'s recording alone, whole and in order ({len(got)} samples)"
            finally:
                g.close()

        check("EDF+ header: one HR signal at 1 Hz in bpm, starting at the session's start (UTC)", header)
        check("HR holds the newest strap reading of every second", heart_rate)
        check("every beat of the CSV export is a beat annotation at its time", beat_annotations)
        check("every breathing cue is an annotation with its phase, start and duration; start and end", cue_annotations)
        f.close()
        check("recorded raw ECG (130 Hz, µV) and accelerometer (50 Hz, g) are channels holding every sample, in order, "
              "at its place; the ecg-csv export has each at the EDF's time", ecg_channel)
        check("two straps' HR and raw ECG are numbered signals naming their device, each ECG its strap's samples alone",
              two_straps)
    except Exception as e:
        report.setup_failed(e)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report.summary()


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
