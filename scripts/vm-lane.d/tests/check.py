#!/usr/bin/python3
"""Assertions of the lane's gateway tests over hr-gateway's JSON output (runs in the guest with /usr/bin/python3).

Each subcommand exits 0 and prints one summary line when the check holds, or prints why not and exits 1.
"""
import csv
import json
import re
import subprocess
import sys


def die(msg):
    print(msg)
    sys.exit(1)


def jsonl(path):
    out = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except ValueError as e:
                die(f"{path}:{n}: not JSON ({e}): {line[:200]}")
    return out


def rr_series(path):
    with open(path) as f:
        return [int(r["rr_1024"]) for r in csv.DictReader(f)]


def scan(args):
    """scan OUTPUT ADDRESS NAME: scan --json lists the strap by its 0x180D advertisement."""
    path, address, name = args
    rows = jsonl(path)
    hits = [r for r in rows if r.get("address", "").upper() == address.upper()]
    if not hits:
        die(f"{address} not in scan output: {rows}")
    r = hits[0]
    if r.get("hr_service") is not True or r.get("match") != "service_uuid":
        die(f"{address} not matched by its 0x180D advertisement: {r}")
    if r.get("name") != name:
        die(f"{address} has name {r.get('name')!r}, expected {name!r}: {r}")
    print(f"found {address} {name!r} match={r['match']} rssi={r.get('rssi')} ({len(rows)} strap(s) listed)")


def segments_of(samples):
    """Splits recorded samples into runs at gap_before; returns [(rr list, samples)]."""
    segs = []
    for s in samples:
        if s.get("gap_before") or not segs:
            segs.append(([], []))
        segs[-1][0].extend(s.get("rr_1024") or [])
        segs[-1][1].append(s)
    return segs


def locate(series, seg):
    """Offsets k where seg is series[k:] continued cyclically."""
    n = len(series)
    return [k for k in range(n) if all(series[(k + i) % n] == v for i, v in enumerate(seg))]


def rr(args):
    """rr RECORD RRFILE [--device ID] [--gaps N] [--min-rr N]: the recorded RR are the emulator's series, each
    interval exactly once and in order, split only at flagged gaps (N of them, default 0), each gap skipping no more
    beats than its wall-clock duration explains (unless --restart 1: the emulator started its series again)."""
    record, rrfile = args[0], args[1]
    opts = dict(zip(args[2::2], args[3::2]))
    series = rr_series(rrfile)
    samples = [s for s in jsonl(record) if "device_id" not in opts or s.get("device_id") == opts["--device"]]
    if not samples:
        die(f"no samples in {record}")
    segs = [(r, ss) for r, ss in segments_of(samples)]
    want_gaps = int(opts.get("--gaps", "0"))
    if len(segs) - 1 != want_gaps:
        die(f"{len(segs) - 1} flagged gap(s), expected {want_gaps}; segment sizes {[len(r) for r, _ in segs]}")
    n = len(series)
    total = 0
    prev_end = None   # (offset of the next beat in the series, timestamp of the last sample)
    for i, (seg, ss) in enumerate(segs):
        if len(seg) < int(opts.get("--min-rr", "5")):
            die(f"segment {i} has only {len(seg)} RR: {seg}")
        seqs = [s.get("notification_seq") for s in ss if s.get("notification_seq") is not None]
        if any(b <= a for a, b in zip(seqs, seqs[1:])):
            die(f"segment {i}: notification_seq not strictly increasing: {seqs}")
        ks = locate(series, seg)
        if len(ks) != 1:
            die(f"segment {i} ({len(seg)} RR, first {seg[:8]}) matches the emulator's series at {len(ks)} offsets {ks[:5]}"
                " (must be exactly one contiguous run: a lost, duplicated or reordered interval breaks it)")
        k = ks[0]
        if prev_end is not None and opts.get("--restart") != "1":
            skipped = (k - prev_end[0]) % n
            skipped_ms = sum(series[(prev_end[0] + j) % n] for j in range(skipped)) * 1000 / 1024
            wall_ms = ss[0]["timestamp_ms"] - prev_end[1]
            if skipped_ms > wall_ms + 3000:
                die(f"gap {i}: the next run starts {skipped} beats ({skipped_ms:.0f} ms) later in the series but only"
                    f" {wall_ms} ms passed: intervals were duplicated or reordered")
        prev_end = ((k + len(seg)) % n, ss[-1]["timestamp_ms"])
        total += len(seg)
    print(f"{total} RR in {len(segs)} run(s) at series offsets "
          f"{[locate(series, s)[0] for s, _ in segs]}, each exactly once and in order")


def hrv_of(rr1024, binary, correct):
    path = "/tmp/lane-hrv-input.csv"
    with open(path, "w") as f:
        f.write("rr_1024\n" + "".join(f"{v}\n" for v in rr1024))
    out = subprocess.run([binary, "hrv", "--json", "--correct", correct, path], capture_output=True, text=True)
    if out.returncode != 0:
        die(f"hr-gateway hrv failed: {out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def compare(metrics, ref, what):
    bad = []
    for key in ("rr_count", "artifact_count"):
        if metrics.get(key) != ref.get(key):
            bad.append(f"{key} {metrics.get(key)} != {ref.get(key)}")
    for key in ("hr_sdnn_ms", "rmssd_ms", "pnn50"):
        a, b = metrics.get(key), ref.get(key)
        if a is None or b is None or abs(a - b) > 1e-6 * max(1, abs(b)):
            bad.append(f"{key} {a} != {b}")
    a, b = metrics.get("hr_from_rr_bpm"), ref.get("hr_from_rr_bpm")
    if a is None or b is None or abs(a - b) > 0.051:
        bad.append(f"hr_from_rr_bpm {a} != {b}")
    if bad:
        die(f"{what} differs from hr-gateway hrv of the same RR: " + "; ".join(bad))


def hrv(args):
    """hrv EVENTS BINARY CORRECT: the last session_frame's HRV equals `hrv` of the RR in the biosignal_frame emitted
    with it, and the summary's equals `hrv` of every RR received (the window covers the whole session)."""
    events, binary, correct = args
    ev = jsonl(events)
    frames = [e for e in ev if e.get("type") == "session_frame" and e["metrics"].get("rr_count")]
    raws = {e["emitted_at_ms"]: e for e in ev if e.get("type") == "biosignal_frame"}
    summary = [e for e in ev if e.get("type") == "session_summary"]
    if not frames or not summary:
        die(f"no session_frame with RR ({len(frames)}) or no session_summary ({len(summary)})")
    frame = frames[-1]
    raw = raws.get(frame["emitted_at_ms"])
    if raw is None:
        die("no biosignal_frame emitted with the last session_frame")
    window_rr = [v for s in raw["samples"] for v in (s.get("rr_1024") or [])]
    compare(frame["metrics"], hrv_of(window_rr, binary, correct), f"session_frame {frame['seq']}")
    m = frame["metrics"]
    print(f"session_frame {frame['seq']}: rr_count {m['rr_count']} rmssd {m['rmssd_ms']:.3f} ms"
          f" sdnn {m['hr_sdnn_ms']:.3f} ms pnn50 {m['pnn50']:.2f} = hr-gateway hrv --correct {correct}")


def summary_hrv(args):
    """summary-hrv EVENTS RECORD BINARY CORRECT: the summary's HRV equals `hrv` of every RR recorded."""
    events, record, binary, correct = args
    summary = [e for e in jsonl(events) if e.get("type") == "session_summary"]
    if not summary:
        die("no session_summary")
    rr_all = [v for s in jsonl(record) for v in (s.get("rr_1024") or [])]
    compare(summary[-1]["metrics"], hrv_of(rr_all, binary, correct), "session_summary")
    print(f"summary rr_count {summary[-1]['metrics'].get('rr_count')} = hr-gateway hrv --correct {correct}")


def status(args):
    """status EVENTS SOURCE STATE...: sensor_status of SOURCE passes through the STATEs in this order."""
    events, source, states = args[0], args[1], args[2:]
    seen = [e["state"] for e in jsonl(events) if e.get("type") == "sensor_status" and e.get("source") == source]
    it = iter(seen)
    if not all(any(s == want for s in it) for want in states):
        die(f"{source} states {seen} do not contain {states} in order")
    print(f"{source}: {' -> '.join(seen)}")


def count(args):
    """count RECORD MIN [DEVICE]: at least MIN samples with RR (of DEVICE)."""
    record, low = args[0], int(args[1])
    ss = [s for s in jsonl(record) if s.get("rr_1024") and (len(args) < 3 or s.get("device_id") == args[2])]
    if len(ss) < low:
        die(f"{len(ss)} samples with RR, expected at least {low}")
    print(f"{len(ss)} samples with RR")


def cameras(args):
    """cameras LISTING PATH DRIVER FOURCC: `cameras --json` lists PATH with DRIVER offering FOURCC with frame sizes."""
    listing, path, driver, fourcc = args
    devs = [d for d in jsonl(listing) if d.get("path") == path]
    if not devs:
        die(f"{path} not listed: {[d.get('path') for d in jsonl(listing)]}")
    d = devs[0]
    if d.get("driver") != driver:
        die(f"{path}: driver {d.get('driver')!r}, expected {driver!r}")
    fmts = [f for f in d.get("formats", []) if f.get("fourcc") == fourcc]
    if not fmts or not fmts[0].get("sizes"):
        die(f"{path}: no {fourcc} with sizes in {[f.get('fourcc') for f in d.get('formats', [])]}")
    sizes = [f"{z['width']}x{z['height']}" for z in fmts[0]["sizes"]]
    names = [f["fourcc"] for f in d["formats"]]
    print(f"{path} {driver} {d.get('card')!r}: {len(names)} formats {names[:6]}; {fourcc} {sizes[:4]}")


def capture(args):
    """capture OUTPUT FRAMES FOURCC: `cameras --capture --json` delivered FRAMES frames in FOURCC, each of the
    negotiated image size, with increasing timestamps."""
    out, frames, fourcc = args[0], int(args[1]), args[2]
    ev = jsonl(out)
    fmt = [e for e in ev if e.get("type") == "format"]
    got = [e for e in ev if e.get("type") == "frame"]
    summ = [e for e in ev if e.get("type") == "summary"]
    if not fmt or fmt[0]["format"]["fourcc"] != fourcc:
        die(f"negotiated {fmt[0]['format'] if fmt else None}, expected {fourcc}")
    if len(got) != frames or not summ or summ[0].get("frames") != frames:
        die(f"{len(got)} frame lines, summary {summ}, expected {frames}")
    size = fmt[0]["format"]["sizeImage"]
    if any(f["bytes"] != size for f in got):
        die(f"frame sizes {[f['bytes'] for f in got]} != sizeImage {size}")
    ts = [f["timestamp"] for f in got]
    if any(b <= a for a, b in zip(ts, ts[1:])):
        die(f"timestamps not increasing: {ts}")
    f = fmt[0]["format"]
    print(f"{frames} frames {f['fourcc']} {f['width']}x{f['height']} of {size} bytes, timestamps increasing")


def feeder_pace(progress):
    """The slowest pace of the clip's feeder over 5 s, from ffmpeg's -progress log (a block a second): the pulse a
    camera shows is slower than the clip's when its feeder falls behind."""
    try:
        steps = feeder_paces(progress)
    except OSError as e:
        return f"; feeder pace unknown ({e})"
    return f"; the feeder's slowest 5 s: {min(steps):.1f} frames/s" if steps else ""


def feeder_paces(progress):
    """The feeder's pace over each 5 s of its ffmpeg -progress log (a block a second), in frames/s."""
    frames = [int(line.split("=", 1)[1]) for line in open(progress) if line.startswith("frame=")]
    return [(b - a) / 5 for a, b in zip(frames, frames[5:])]


def pace(args):
    """pace EVENTS PROGRESS: the provider's first "The camera delivers X fps, not the R fps its driver reports"
    message gives a pace X the feeder kept over some 5 s (within half a frame per second of its slowest and fastest
    5 s, from PROGRESS, its ffmpeg -progress log), well below the driver's R: the pace said is the one measured, on a
    machine fast or slow."""
    events, progress = args[0], args[1]
    said = [e.get("message", "") for e in jsonl(events) if e.get("type") == "sensor_status"]
    found = [re.search(r"The camera delivers ([0-9.]+) fps, not the ([0-9.]+) fps its driver reports", m) for m in said]
    found = [m for m in found if m]
    if not found:
        die("no pace message; sensor_status messages: " + " | ".join(m for m in said if m)[:400])
    x, r = float(found[0].group(1)), float(found[0].group(2))
    steps = feeder_paces(progress)
    if not steps:
        die(f"the feeder's progress log {progress} has under 6 blocks")
    low, high = min(steps), max(steps)
    if not (low - 0.5 <= x <= high + 0.5) or x > 0.9 * r:
        die(f"pace said {x} fps (driver {r}); the feeder's 5 s paces {low:.1f}..{high:.1f} frames/s")
    print(f"pace said {x} fps, not the driver's {r}; the feeder's 5 s paces {low:.1f}..{high:.1f} frames/s")


def camera_hr(args):
    """camera-hr EVENTS BPM TOLERANCE [PROGRESS]: a session_frame carries camera_hr_bpm within TOLERANCE of BPM;
    PROGRESS, the feeder's ffmpeg -progress log, is summed up alongside."""
    events, bpm, tol = args[0], float(args[1]), float(args[2])
    pace = feeder_pace(args[3]) if len(args) > 3 else ""
    hrs = [e["metrics"]["camera_hr_bpm"] for e in jsonl(events)
           if e.get("type") == "session_frame" and "camera_hr_bpm" in e.get("metrics", {})]
    if not hrs:
        die("no session_frame with camera_hr_bpm" + pace)
    if abs(hrs[-1] - bpm) > tol:
        die(f"camera_hr_bpm {hrs} (last {hrs[-1]}), expected {bpm} +- {tol}{pace}")
    print(f"camera_hr_bpm {hrs[-1]} (clip pulse {bpm}); frames with camera HR: {len(hrs)}{pace}")


def ecg(args):
    """ecg RECORD FIXTURE MIN: the recorded ECG chunks, joined, are a run of the (looping) recording of at least MIN
    samples, every sample once and in order."""
    record, fixture, least = args[0], args[1], int(args[2])
    got = [v for s in jsonl(record) if s.get("source") == "polar_ecg" for v in s.get("ecg_uv", [])]
    with open(fixture) as f:
        series = [int(v) for v in f.read().split()[1:]]
    if len(got) < least:
        die(f"{len(got)} ECG samples recorded, expected at least {least}")
    looped = series * (len(got) // len(series) + 2)
    for start in range(len(series)):
        if looped[start:start + len(got)] == got:
            print(f"{len(got)} ECG samples, the recording from sample {start}, once and in order")
            return
    die(f"the {len(got)} recorded ECG samples are not one run of the recording (first {got[:6]})")


def ecg_rate(args):
    """ecg-rate RECORD HZ TOL: the recorded ECG chunks' times (each its first sample's, on the host's clock) against
    their first samples' indexes lie on a line of HZ samples per second, within TOL Hz (least squares), while the
    chunks say the nominal 130 Hz: the strap's own rate reaches the host's times."""
    record, hz, tol = args[0], float(args[1]), float(args[2])
    chunks = [s for s in jsonl(record) if s.get("source") == "polar_ecg" and s.get("ecg_uv")]
    if len(chunks) < 10:
        die(f"{len(chunks)} ECG chunks recorded, expected at least 10")
    if any(s.get("gap_before") for s in chunks[1:]):
        die("a gap was flagged between the ECG chunks")
    xs, index = [], 0
    for s in chunks:
        xs.append(index)
        index += len(s["ecg_uv"])
    ts = [s["timestamp_ms"] for s in chunks]
    mx, mt = sum(xs) / len(xs), sum(ts) / len(ts)
    slope = sum((x - mx) * (t - mt) for x, t in zip(xs, ts)) / sum((x - mx) ** 2 for x in xs)
    rate = 1000 / slope
    nominal = {s.get("ecg_rate_hz") for s in chunks}
    if nominal != {130}:
        die(f"ecg_rate_hz {sorted(nominal)}, expected the nominal 130")
    if abs(rate - hz) > tol:
        die(f"the chunks' times say {rate:.3f} Hz, the strap's ECG runs at {hz} Hz")
    print(f"{len(chunks)} ECG chunks over {(ts[-1] - ts[0]) / 1000:.1f} s: {rate:.3f} Hz by their times (strap {hz} Hz)")


def ecg_agreement(args):
    """ecg-agreement EVENTS MAXMS MINRR: the newest session_frame whose ECG gave at least MINRR intervals has
    ecg_rr_agreement_ms (the RR from the ECG's R peaks against the strap's own RR) at most MAXMS."""
    events, most, least = args[0], float(args[1]), int(args[2])
    frames = [e["metrics"] for e in jsonl(events) if e.get("type") == "session_frame"
              and e.get("metrics", {}).get("ecg_rr_count", 0) >= least and "ecg_rr_agreement_ms" in e["metrics"]]
    if not frames:
        die(f"no session_frame with ecg_rr_agreement_ms over {least} or more ECG intervals")
    m = frames[-1]
    if m["ecg_rr_agreement_ms"] > most:
        die(f"ecg_rr_agreement_ms {m['ecg_rr_agreement_ms']} over {m['ecg_rr_count']} intervals, expected at most {most}")
    print(f"ecg_rr_agreement_ms {m['ecg_rr_agreement_ms']} over {m['ecg_rr_count']} intervals "
          f"(ECG HR {m.get('ecg_hr_bpm')} bpm)")


def acc(args):
    """acc RECORD HZ MIN: the recorded accelerometer chunks, joined, are at least MIN consecutive samples of the
    emulator's pattern (StrapEmulatorPMD.accelerometerSample: sample i in milli-g is (i % 50 - 25, 7 i % 31 - 15,
    1000 - i % 3), recognisable modulo 4650), every sample once and in order, with times 1/HZ apart in each chunk."""
    record, hz, least = args[0], int(args[1]), int(args[2])
    chunks = [s for s in jsonl(record) if s.get("source") == "polar_acc" and s.get("acc_g")]
    got = [tuple(round(v * 1000) for v in xyz) for s in chunks for xyz in s["acc_g"]]
    if len(got) < least:
        die(f"{len(got)} accelerometer samples recorded, expected at least {least}")
    if any(abs(s.get("acc_rate_hz", hz) - hz) > 1e-9 for s in chunks):
        die(f"acc_rate_hz {sorted({s.get('acc_rate_hz') for s in chunks})}, expected {hz}")
    pattern = {(i % 50 - 25, (i * 7) % 31 - 15, 1000 - i % 3): i for i in range(4650)}
    index = [pattern.get(v) for v in got]
    if None in index:
        k = index.index(None)
        die(f"sample {k} {got[k]} mg is not the emulator's")
    for k in range(1, len(index)):
        if index[k] != (index[k - 1] + 1) % 4650:
            die(f"sample {k} is pattern sample {index[k]} after {index[k - 1]}: lost, repeated or out of order")
    print(f"{len(got)} accelerometer samples at {hz} Hz, from pattern sample {index[0]}, once and in order")


if __name__ == "__main__":
    cmds = {"scan": scan, "rr": rr, "hrv": hrv, "summary-hrv": summary_hrv, "status": status, "count": count,
            "cameras": cameras, "capture": capture, "camera-hr": camera_hr, "pace": pace, "ecg": ecg, "ecg-rate": ecg_rate,
            "ecg-agreement": ecg_agreement, "acc": acc}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        die("usage: check.py " + "|".join(cmds) + " ARGS...")
    cmds[sys.argv[1]](sys.argv[2:])
