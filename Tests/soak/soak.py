"""Soak of the built hr-gateway: RSS over a long session with the relay and recording on (see scripts/soak)."""
import argparse
import asyncio
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

import websockets


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def write_strap(path, seconds, seed=1):
    """A strap's notifications, one a second, with the RR intervals of the beats completed since the previous one:
    a mean rate drifting around 64 bpm, breathing at 12/min modulating RR by up to 45 ms, an occasional ectopic beat.
    Synthetic: it exercises the pipeline's memory, not its arithmetic."""
    rng = random.Random(seed)
    t0 = 1_700_000_000_000
    beat = 0.0
    pending = []
    with open(path, "w") as f:
        for s in range(seconds):
            end = (s + 1) * 1000.0
            while True:
                mean = 60000 / (64 + 4 * math.sin(2 * math.pi * beat / 600000))
                rr = mean + 45 * math.sin(2 * math.pi * beat / 5000) + rng.gauss(0, 8)
                if rng.random() < 0.01:
                    rr *= 0.7
                if beat + rr > end:
                    break
                beat += rr
                pending.append(round(rr, 1))
            bpm = round(60000 / (sum(pending) / len(pending)), 1) if pending else 64.0
            sample = {"timestamp_ms": t0 + s * 1000, "bpm": bpm, "source": "ble_hrm", "device_id": "soak-strap"}
            if pending:
                sample["rr_intervals_ms"] = pending
            f.write(json.dumps(sample) + "\n")
            pending = []


async def consumer(url, counts, stop):
    while not stop.is_set():
        try:
            async with websockets.connect(url, max_size=1 << 20) as ws:
                async for text in ws:
                    m = json.loads(text)
                    counts["messages"] += 1
                    if m.get("delivery") == "reliable" and "relay_seq" in m:
                        counts["acked"] += 1
                        await ws.send(json.dumps({"command": "ack", "relay_seq": m["relay_seq"]}))
        except (OSError, websockets.ConnectionClosed):
            counts["reconnects"] += 1
            await asyncio.sleep(1)


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("binary")
    p.add_argument("--minutes", type=float, default=30)
    p.add_argument("--speed", type=float, default=10)
    p.add_argument("--consumers", type=int, default=5)
    p.add_argument("--warm-up", type=float, default=15 * 60 + 30,
                   help="seconds before the baseline RSS (default: the relay's 15-minute resume buffer, full)")
    a = p.parse_args()
    run_sec = a.minutes * 60
    state = tempfile.mkdtemp(prefix="hr-gateway-soak-")
    beats = os.path.join(state, "strap.jsonl")
    write_strap(beats, int(run_sec * a.speed) + 600)
    # The resume buffer keeps 15 minutes (real time) of numbered events: RSS grows until it is full.
    warm_up = min(run_sec / 2, a.warm_up)
    gateway = subprocess.Popen(
        [a.binary, "stream", "--replay", beats, "--replay-speed", str(a.speed), "--format", "jsonl", "--raw",
         "--listen", "127.0.0.1:0", "--no-auth", "--state-dir", state, "--session-id", "soak"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = None
    while url is None:
        line = await asyncio.to_thread(gateway.stderr.readline)
        if not line:
            sys.exit(f"soak: the gateway ended before listening (status {gateway.wait()})")
        found = re.search(r"listening on (ws://\S+)", line)
        url = found.group(1) if found else None
    stderr_tail = []

    def read_stderr():
        for line in gateway.stderr:
            stderr_tail.append(line.rstrip())
            del stderr_tail[:-20]

    frames = {"n": 0}

    def read_stdout():
        for line in gateway.stdout:
            if '"session_frame"' in line:
                frames["n"] += 1

    asyncio.get_running_loop().run_in_executor(None, read_stderr)
    asyncio.get_running_loop().run_in_executor(None, read_stdout)
    counts = [{"messages": 0, "acked": 0, "reconnects": 0} for _ in range(a.consumers)]
    stop = asyncio.Event()
    tasks = [asyncio.create_task(consumer(url, c, stop)) for c in counts]
    start = time.monotonic()
    start_rss = rss_kb(gateway.pid)
    print(f"soak: {a.binary}, {a.minutes:g} min, strap at {a.speed:g}x, relay (--raw) to {a.consumers} consumers, "
          f"recording on; state {state}", flush=True)
    print(f"  RSS at start: {start_rss} kB; warm-up {warm_up:.0f} s (the relay's 15-minute resume buffer)", flush=True)
    baseline = None
    next_report = 60
    while (elapsed := time.monotonic() - start) < run_sec:
        if gateway.poll() is not None:
            sys.exit(f"soak: the gateway ended early (status {gateway.returncode}): " + "\n".join(stderr_tail))
        if baseline is None and elapsed >= warm_up:
            baseline = rss_kb(gateway.pid)
            print(f"  RSS after warm-up ({elapsed:.0f} s): {baseline} kB", flush=True)
        if elapsed >= next_report:
            print(f"  {elapsed / 60:4.0f} min: RSS {rss_kb(gateway.pid)} kB, {frames['n']} session frames, "
                  f"{sum(c['messages'] for c in counts)} messages to consumers", flush=True)
            next_report += 60
        await asyncio.sleep(1)
    end_rss = rss_kb(gateway.pid)
    gateway.terminate()
    status = await asyncio.to_thread(gateway.wait)
    stop.set()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    base = baseline if baseline is not None else start_rss
    growth = end_rss - base
    print(f"  RSS at end: {end_rss} kB; gateway exit status {status}")
    print(f"  consumers: {[c['messages'] for c in counts]} messages, {sum(c['acked'] for c in counts)} reliable "
          f"acknowledged, {sum(c['reconnects'] for c in counts)} reconnects")
    print(f"  RSS growth after warm-up: {growth / 1024:+.2f} MB (from start: {(end_rss - start_rss) / 1024:+.2f} MB); "
          f"target at most 1 MB: {'met' if growth <= 1024 else 'NOT met'}")
    shutil.rmtree(state, ignore_errors=True)
    sys.exit(0 if growth <= 1024 else 1)


asyncio.run(main())
