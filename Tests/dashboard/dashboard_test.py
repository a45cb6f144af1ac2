"""The relay's web dashboard (`GET /`) in a real headless browser, Debian's chromium, against a simulated session.

Runs `hr-gateway stream --simulate --pattern 2-1-2-0 --listen 127.0.0.1:0 --raw --format jsonl` (a paced breathing
session, recorded in a temporary state directory) and takes the events it prints on standard output as the truth. Chromium is driven over the Chrome DevTools Protocol (a `websockets` client): it opens
`http://127.0.0.1:PORT/#token=TOKEN`, records every request the page makes, and reads the page's elements with
Runtime.evaluate, polling each condition until a deadline. Checks that the numbers shown are those of an emitted
session_frame, that the RR tachogram holds the emitted beats, that the simulated strap shows as streaming, that both
charts are drawn, that the pacer follows the emitted breathing cues, that the session list offers the running
session and its CSV download equals the beats emitted, that a session recorded with raw ECG offers an ECG CSV download
equal to `sessions export --format ecg-csv`, that the page fits a phone's screen and shows the same numbers
there, that no raw JSON is on screen, that no request leaves 127.0.0.1:PORT (no CDN: works offline), that a wrong
token shows an authentication failure instead of numbers, that a gateway without a session shows the empty state,
that a reload draws the heart-rate chart at once from the frames emitted before it, and that SIGTERM ends the
session with a summary the page shows.
Prints 'N passed, N failed'; exits non-zero on any failure.
Usage: python3 dashboard_test.py PATH/TO/hr-gateway
  CHROMIUM=PATH overrides /usr/bin/chromium; DASHBOARD_SCREENSHOTS=DIR saves screenshots of the live page at a
  desktop and a phone size (desktop.png, phone.png) and of the empty state (empty.png).
"""

import asyncio
import base64
import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from report import Report  # noqa: E402

import websockets
from websockets.exceptions import ConnectionClosed

BINARY = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".build/debug/hr-gateway")
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
SCREENSHOTS = os.environ.get("DASHBOARD_SCREENSHOTS")  # a directory for PNGs of the page, for a person to look at
PATTERN = "2-1-2-0"  # inhale 2 s, hold 1 s, exhale 2 s: 12 breaths/min, every phase seen within seconds
DESKTOP = {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False}
PHONE = {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True}
# RR-derived breathing needs at least 30 s of beats (docs/hrv.md §4): the shortest window that yields it, and the
# time the simulated strap takes to fill it (about 35 s), bound the run.
WINDOW_SEC = 30
BREATHING_DEADLINE = 55  # seconds after the gateway started
STEP_TIMEOUT = 20
POLL_INTERVAL = 0.2
ECG_SESSION = "ecg-recorded"  # a session with raw ECG, recorded into the state directory before the live one
ECG_FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Fixtures", "ecg_mitbih208_130hz.csv")


def record_ecg_session(state, work):
    """Replays 5 s of a real ECG excerpt (as `stream --ecg` records a Polar strap's chunks) into the store; returns
    its ecg-csv export as `sessions export` writes it."""
    with open(ECG_FIXTURE) as fh:
        ecg = [int(v) for v in fh.read().split()[1:]][:130 * 5]
    t0 = 1_700_000_000_000
    lines = [{"timestamp_ms": t0 + round(i * 1000 / 130), "bpm": 0, "device_id": "A0:9E:1A:00:00:02",
              "source": "polar_ecg", "ecg_uv": ecg[i:i + 73], "ecg_rate_hz": 130} for i in range(0, len(ecg), 73)]
    lines += [{"timestamp_ms": t0 + 900 + 1000 * s, "bpm": 60, "rr_intervals_ms": [1000],
               "device_id": "A0:9E:1A:00:00:02", "source": "ble_hrm"} for s in range(5)]
    lines.sort(key=lambda x: x["timestamp_ms"])
    rec = os.path.join(work, "ecg.jsonl")
    with open(rec, "w") as fh:
        fh.write("".join(json.dumps(x) + "\n" for x in lines))
    for args in (["stream", "--replay", rec, "--replay-speed", "100", "--format", "jsonl", "--session-id", ECG_SESSION],
                 ["sessions", "export", ECG_SESSION, "--format", "ecg-csv"]):
        r = subprocess.run([BINARY] + args + ["--state-dir", state], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise SetupError(f"{' '.join(args[:2])} of the ECG session failed: {r.stderr}")
    return r.stdout


STRAP_A, STRAP_B = "A0:9E:1A:00:00:0A", "A0:9E:1A:00:00:0B"


def two_strap_recording(work):
    """Two straps on two people, 60 and 150 bpm, as `--record` writes them: B's notification comes after A's in
    every second, so the newest reading of all is always B's. The frames' top level is A's (A alone sends in the
    first three seconds, and both cover the window after), so the pages show A's heart rate, not each
    notification's in turn. A's beats wander slowly (an AR(1) series, so its live DFA alpha1 is high), B's
    alternate. Synthetic: this checks what the pages show, not the estimates."""
    t0 = 1_700_000_000_000
    rng = random.Random(5)
    lines, x = [], 0.0
    for s in range(1200):
        x = 0.95 * x + 40 * math.sqrt(1 - 0.95 ** 2) * rng.gauss(0, 1)
        lines.append({"timestamp_ms": t0 + 1000 * s + 100, "bpm": 60, "rr_intervals_ms": [round(1000 + x, 1)],
                      "device_id": STRAP_A, "source": "ble_hrm"})
        if s < 3:
            continue
        lines.append({"timestamp_ms": t0 + 1000 * s + 600, "bpm": 150,
                      "rr_intervals_ms": [390, 410] if s % 2 else [400, 420, 380], "device_id": STRAP_B, "source": "ble_hrm"})
    rec = os.path.join(work, "two-straps.jsonl")
    with open(rec, "w") as fh:
        fh.write("".join(json.dumps(x) + "\n" for x in lines))
    return rec


class SetupError(Exception):
    pass


class Lines:
    """Reads a child's pipe on a thread; `wait_for` returns the first line matching, within a deadline."""

    def __init__(self, pipe):
        self.lines = []
        self.cond = threading.Condition()
        self.closed = False
        threading.Thread(target=self._read, args=(pipe,), daemon=True).start()

    def _read(self, pipe):
        for line in pipe:
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def wait_for(self, pred, timeout):
        deadline = time.monotonic() + timeout
        with self.cond:
            seen = 0
            while True:
                for line in self.lines[seen:]:
                    if pred(line):
                        return line
                seen = len(self.lines)
                left = deadline - time.monotonic()
                if self.closed or left <= 0:
                    return None
                self.cond.wait(left)

    def tail(self, n=15):
        with self.cond:
            return "\n".join(self.lines[-n:])


class Gateway:
    def __init__(self, state, args=None):
        self.proc = subprocess.Popen(
            [BINARY] + (args or ["stream", "--simulate", "--pattern", PATTERN, "--listen", "127.0.0.1:0",
                                 "--emit-interval", "1", "--window", str(WINDOW_SEC), "--raw", "--format", "jsonl"])
            + ["--state-dir", state],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.started = time.monotonic()
        self.out = Lines(self.proc.stdout)
        self.err = Lines(self.proc.stderr)
        # `stream` announces its relay on stderr (stdout carries the events), `serve` on stdout.
        announcer = self.out if args and args[0] == "serve" else self.err
        line = announcer.wait_for(lambda l: l.startswith("relay: listening on "), STEP_TIMEOUT)
        if not line:
            self.stop()
            raise SetupError(f"the gateway did not announce its relay address; its stderr:\n{self.err.tail()}")
        m = re.match(r"relay: listening on ws://127\.0\.0\.1:(\d+)/v1/relay$", line)
        if not m:
            raise SetupError(f"unexpected announcement: {line!r}")
        self.port = int(m.group(1))

    def events(self, type_=None):
        with self.out.cond:
            lines = list(self.out.lines)
        out = []
        for line in lines:
            e = json.loads(line)
            if type_ is None or e.get("type") == type_:
                out.append(e)
        return out

    def wait_event(self, pred, timeout=STEP_TIMEOUT):
        line = self.out.wait_for(lambda l: pred(json.loads(l)), timeout)
        return json.loads(line) if line else None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return "killed after 30 s without exiting on SIGTERM"


class Chromium:
    def __init__(self, profile):
        if not os.access(CHROMIUM, os.X_OK):
            raise SetupError(f"{CHROMIUM} not found: install Debian's chromium package (apt-get install chromium)")
        # Its own process group, so the whole browser (zygote, renderers) ends with it.
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-port=0",
             f"--user-data-dir={profile}", "--no-first-run", "--no-default-browser-check",
             "--disable-background-networking", "--disable-component-update", "--disable-extensions",
             "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            start_new_session=True)
        self.err = Lines(self.proc.stderr)
        line = self.err.wait_for(lambda l: "DevTools listening on ws://" in l, STEP_TIMEOUT)
        if not line:
            self.stop()
            raise SetupError(f"chromium did not print its DevTools address; its stderr:\n{self.err.tail()}")
        self.devtools = line[line.index("ws://"):].strip()

    def stop(self):
        if self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        except ProcessLookupError:
            pass


class CDP:
    """A Chrome DevTools Protocol connection to the browser; pages are reached through flat sessions."""

    def __init__(self, ws):
        self.ws = ws
        self.next_id = 0
        self.pending = {}
        self.handlers = []
        self.reader = asyncio.create_task(self._read())

    @classmethod
    async def connect(cls, url):
        return cls(await websockets.connect(url, max_size=None, open_timeout=STEP_TIMEOUT))

    async def _read(self):
        try:
            async for raw in self.ws:
                m = json.loads(raw)
                if "id" in m:
                    fut = self.pending.pop(m["id"], None)
                    if fut and not fut.done():
                        fut.set_result(m)
                else:
                    for h in list(self.handlers):
                        h(m)
        except ConnectionClosed:
            pass
        finally:
            for fut in self.pending.values():
                if not fut.done():
                    fut.set_exception(ConnectionError("DevTools connection closed"))

    async def call(self, method, params=None, session=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        fut = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = fut
        await self.ws.send(json.dumps(msg))
        r = await asyncio.wait_for(fut, STEP_TIMEOUT)
        if "error" in r:
            raise AssertionError(f"DevTools {method}: {r['error']}")
        return r.get("result", {})

    async def close(self):
        await self.ws.close()
        self.reader.cancel()


class Tab:
    """One page, in its own browser context when `isolated` (its own localStorage)."""

    @classmethod
    async def open(cls, cdp, isolated=False):
        tab = cls()
        tab.cdp = cdp
        tab.requests = []
        tab.errors = []
        params = {"url": "about:blank"}
        if isolated:
            params["browserContextId"] = (await cdp.call("Target.createBrowserContext"))["browserContextId"]
        target = (await cdp.call("Target.createTarget", params))["targetId"]
        tab.session = (await cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True}))["sessionId"]
        cdp.handlers.append(tab._event)
        for domain in ("Network", "Runtime", "Page", "Log"):
            await tab.call(f"{domain}.enable")
        return tab

    def _event(self, m):
        if m.get("sessionId") != self.session:
            return
        p = m.get("params", {})
        if m["method"] == "Network.requestWillBeSent":
            self.requests.append(p["request"]["url"])
        elif m["method"] == "Network.webSocketCreated":
            self.requests.append(p["url"])
        elif m["method"] == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            self.errors.append(d.get("exception", {}).get("description") or d.get("text"))
        elif m["method"] == "Log.entryAdded" and "Content Security Policy" in p["entry"].get("text", ""):
            # The page's own script or style refused by its policy (a hash that no longer matches).
            self.errors.append(p["entry"]["text"])

    async def call(self, method, params=None):
        return await self.cdp.call(method, params, self.session)

    async def navigate(self, url):
        r = await self.call("Page.navigate", {"url": url})
        assert not r.get("errorText"), f"navigating to {url}: {r['errorText']}"

    async def eval(self, expression):
        r = await self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise AssertionError(f"the page has no such element or value: {d.get('exception', {}).get('description') or d}")
        return r["result"].get("value")

    async def poll(self, expression, pred, what, timeout=STEP_TIMEOUT):
        """Evaluates `expression` until `pred` holds on its value; fails naming `what` and the last value seen.
        An exception (the page not loaded yet) counts as not yet."""
        deadline = time.monotonic() + timeout
        value = None
        while time.monotonic() < deadline:
            try:
                value = await self.eval(expression)
                if pred(value):
                    return value
            except AssertionError as e:
                value = str(e)
            await asyncio.sleep(POLL_INTERVAL)
        raise AssertionError(f"{what} within {timeout:.0f} s; the page showed: {value}")


SNAPSHOT = """(() => {
  const t = (id) => document.getElementById(id).textContent.trim();
  const m = document.getElementById("metrics"), auth = document.getElementById("auth"), hr = document.getElementById("hr");
  const p = document.getElementById("pacer");
  return {
    seq: m.dataset.seq ? Number(m.dataset.seq) : null, session: m.dataset.session || null,
    hr: t("hr"), hrSeq: hr.dataset.seq ? Number(hr.dataset.seq) : null, hrSource: hr.dataset.source || null,
    hrDevice: hr.dataset.device || null, dfa: t("dfa"), dfaZone: t("dfa-zone"),
    straps: getComputedStyle(document.getElementById("straps-tile")).display === "none" ? null
      : [...document.querySelectorAll("#straps tr")].map((tr) => ({device: tr.dataset.device, primary: tr.dataset.primary === "1",
          cells: [...tr.children].map((td) => td.textContent)})),
    hrMean: t("hr-mean"), zone: t("zone"), zoneNumber: Number(document.getElementById("zone").dataset.zone),
    rmssd: t("rmssd"), sdnn: t("sdnn"), resp: t("resp"), respSource: t("resp-source"),
    rsa: t("rsa"), adherence: t("adherence"), coherence: t("coherence"),
    rrSeq: document.getElementById("rr-chart").dataset.seq ? Number(document.getElementById("rr-chart").dataset.seq) : null,
    rrLast: t("rr-last"), beats: t("beats"), conn: t("conn"), sessionText: t("session"), summary: t("summary"),
    sensors: [...document.querySelectorAll("#sensors li")].map((li) => ({
      source: li.dataset.source, device: li.dataset.device, state: li.dataset.state, text: li.textContent})),
    auth: getComputedStyle(auth).display === "none" ? "" : auth.textContent,
    empty: getComputedStyle(document.getElementById("empty")).display !== "none",
    pacer: {active: p.dataset.active, phase: p.dataset.phase || null, cycle: p.dataset.cycle ? Number(p.dataset.cycle) : null,
            durationMs: p.dataset.durationMs ? Number(p.dataset.durationMs) : null, text: t("pacer-text"), info: t("pacer-info"),
            transition: getComputedStyle(document.getElementById("pacer-circle")).transitionDuration},
    sessions: [...document.querySelectorAll("#sessions tr")].map((tr) => ({id: tr.dataset.session, text: tr.textContent})),
    bodyText: document.body.innerText,
    layout: {scrollWidth: document.documentElement.scrollWidth, innerWidth: innerWidth,
             hrFont: parseFloat(getComputedStyle(hr).fontSize), hrTop: hr.getBoundingClientRect().top,
             hrBottom: hr.getBoundingClientRect().bottom, innerHeight: innerHeight},
  };
})()"""

# Pixels of a chart's series colour (drawn data, not the grey grid or the labels).
SERIES_PIXELS = """((id, rgb) => {
  const c = document.getElementById(id), d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4)
    if (d[i + 3] > 200 && Math.abs(d[i] - rgb[0]) < 40 && Math.abs(d[i + 1] - rgb[1]) < 40 && Math.abs(d[i + 2] - rgb[2]) < 40) n++;
  return n;
})"""
HR_RGB, RR_RGB = (255, 85, 85), (85, 170, 255)


def number(text, what):
    assert re.fullmatch(r"-?\d+(\.\d+)?", text), f"{what} shows {text!r}, not a number"
    return float(text)


def shown_as(text, value, digits, what):
    """`text` is `value` rounded to `digits` decimals, or '–' when the gateway had no value (absent or 0)."""
    if value is None or value == 0:
        assert text == "–", f"{what}: the frame has no value but the page shows {text!r}"
        return
    got = number(text, what)
    assert abs(got - value) <= 0.5 * 10 ** -digits + 1e-9, f"{what}: page {text}, gateway {value}"


def check_frame(snap, frame):
    assert frame is not None, f"the gateway printed no session_frame with seq {snap['seq']}"
    assert snap["session"] == frame["session_id"], (snap["session"], frame["session_id"])
    x = frame["metrics"]
    shown_as(snap["hrMean"], x["hr_mean_bpm"], 0, "window mean heart rate")
    shown_as(snap["rmssd"], x["rmssd_ms"], 0, "RMSSD")
    shown_as(snap["sdnn"], x["hr_sdnn_ms"], 0, "SDNN")
    shown_as(snap["resp"], x.get("resp_rate_rr_bpm"), 1, "breathing")


OVERLAY = """(() => {
  const v = document.getElementById("value"), h = document.getElementById("heart");
  const cs = (el) => getComputedStyle(el);
  return {
    text: v.textContent.trim(), seq: v.dataset.seq ? Number(v.dataset.seq) : null, source: v.dataset.source || null,
    device: v.dataset.device || null,
    unit: document.getElementById("unit").textContent, conn: document.body.dataset.conn,
    bodyBackground: cs(document.body).backgroundColor, htmlBackground: cs(document.documentElement).backgroundColor,
    color: cs(v).color, fontSize: cs(document.body).fontSize, beating: h.classList.contains("beat"),
    period: cs(h).animationDuration,
  };
})()"""


def frame_with_seq(gw, seq):
    return gw.wait_event(lambda e: e.get("type") == "session_frame" and e.get("seq") == seq)


def newest_sample(frame):
    samples = [x for x in frame["samples"] if x.get("bpm", 0) > 0 and x.get("source") != "camera_rppg"]
    return max(samples, key=lambda x: x["timestamp_ms"])


def check_big_number(snap, gw):
    """The big number is the newest reading of the biosignal_frame it names (or the mean of the session_frame)."""
    if snap["hrSource"] == "sample":
        frame = gw.wait_event(lambda e: e.get("type") == "biosignal_frame" and e.get("seq") == snap["hrSeq"])
        assert frame, f"the gateway printed no biosignal_frame with seq {snap['hrSeq']}"
        bpm = newest_sample(frame)["bpm"]
    else:
        assert snap["hrSource"] == "frame", snap["hrSource"]
        bpm = frame_with_seq(gw, snap["hrSeq"])["metrics"]["hr_mean_bpm"]
    shown_as(snap["hr"], bpm, 0, f"big heart rate ({snap['hrSource']})")
    share = bpm / 190
    zone = 0 if share < 0.5 else min(5, int((share - 0.5) * 10) + 1)
    assert snap["zoneNumber"] == zone and f"{round(share * 100)} % of max 190" in snap["zone"], \
        f"zone: page {snap['zoneNumber']} ({snap['zone']!r}), expected {zone} for {bpm} bpm"


async def run_checks(report, gw, tab, bad, overlay, token, empty_gw, empty_tab, downloads, ecg_csv, two_gw, two_tab):
    check = report.acheck

    base = f"http://127.0.0.1:{gw.port}/"
    await tab.navigate(f"{base}#token={token}")

    async def live_numbers():
        snap = await tab.poll(SNAPSHOT, lambda s: s["seq"] and s["hrSource"] == "sample" and s["rmssd"] != "–",
                              "no live heart rate and RMSSD shown")
        number(snap["hr"], "heart rate")
        number(snap["rmssd"], "RMSSD")
        check_frame(snap, frame_with_seq(gw, snap["seq"]))
        check_big_number(snap, gw)
        assert snap["conn"] == "connected", snap["conn"]
        assert snap["sessionText"] == snap["session"], (snap["sessionText"], snap["session"])
        assert snap["straps"] is None, f"one strap, yet a straps table: {snap['straps']}"

    async def tachogram():
        snap = await tab.poll(SNAPSHOT, lambda s: s["rrSeq"] and int(s["beats"]) >= 3, "fewer than 3 beats")
        newest = gw.wait_event(lambda e: e.get("type") == "biosignal_frame" and e.get("seq") == snap["rrSeq"])
        assert newest, f"the gateway printed no biosignal_frame with seq {snap['rrSeq']}"
        frames = [e for e in gw.events("biosignal_frame") if e["seq"] <= snap["rrSeq"]]
        emitted = {(s["device_id"], s["timestamp_ms"], i)
                   for e in frames for s in e["samples"] for i in range(len(s.get("rr_intervals_ms", [])))}
        assert int(snap["beats"]) == len(emitted), f"page {snap['beats']} beats, gateway sent {len(emitted)}"
        last = max(newest["samples"], key=lambda s: s["timestamp_ms"])["rr_intervals_ms"][-1]
        shown_as(snap["rrLast"], last, 0, "last RR interval")

    async def sensor_state():
        emitted = gw.wait_event(lambda e: e.get("type") == "sensor_status" and e.get("source") == "simulated")
        assert emitted and emitted["state"] == "streaming", f"the gateway's sensor_status: {emitted}"
        snap = await tab.poll(SNAPSHOT, lambda s: any(x["source"] == "simulated" for x in s["sensors"]),
                              "no simulated sensor listed")
        (s,) = [x for x in snap["sensors"] if x["source"] == "simulated"]
        assert s["device"] == emitted["device_id"] and s["state"] == "streaming", s
        assert "streaming" in s["text"] and emitted["device_id"] in s["text"], s["text"]

    async def wrong_token():
        await bad.navigate(f"{base}#token=hrg_not_a_real_token")
        snap = await bad.poll(SNAPSHOT, lambda s: "refused" in s["conn"], "no authentication failure shown")
        assert "401" in snap["conn"] and "token" in snap["auth"], snap
        assert snap["hr"] == "–" and snap["seq"] is None and snap["rmssd"] == "–", f"numbers shown: {snap}"
        assert snap["sensors"] == [] and snap["sessions"] == [], (snap["sensors"], snap["sessions"])
        # Without any token the page does not prompt: it tries without one and, refused, says how to get one.
        await bad.eval('localStorage.removeItem("hrg-token")')
        await bad.navigate(base)
        snap = await bad.poll(SNAPSHOT, lambda s: "refused" in s["conn"], "no authentication failure without a token")
        assert "needs a token" in snap["auth"] and snap["hr"] == "–", snap

    async def breathing():
        # Every frame shown on the way is compared too: one frame's values may round alike by chance, 30 do not.
        shown = {}

        def until_breathing(s):
            if s.get("seq"):
                shown[s["seq"]] = s
            return s["resp"] != "–"

        left = BREATHING_DEADLINE - (time.monotonic() - gw.started)
        snap = await tab.poll(SNAPSHOT, until_breathing, "no breathing rate shown", timeout=left)
        number(snap["resp"], "breathing")
        assert snap["respSource"] == "from RR", snap["respSource"]
        frame = frame_with_seq(gw, snap["seq"])
        check_frame(snap, frame)
        assert "resp_rate_rr_bpm" in frame["metrics"], frame
        assert len(shown) >= 10, f"the page showed only {len(shown)} distinct frames: {sorted(shown)}"
        for seq, s in sorted(shown.items()):
            check_frame(s, frame_with_seq(gw, seq))

    async def charts():
        hr = await tab.eval(f"{SERIES_PIXELS}('hr-chart', {list(HR_RGB)})")
        rr = await tab.eval(f"{SERIES_PIXELS}('rr-chart', {list(RR_RGB)})")
        blank = await tab.eval("""(() => { const c = document.getElementById("hr-chart"), b = document.createElement("canvas");
            b.width = c.width; b.height = c.height; return c.toDataURL() !== b.toDataURL(); })()""")
        assert blank, "the heart-rate chart is blank"
        assert hr >= 100, f"the heart-rate chart has {hr} pixels of its series colour"
        assert rr >= 100, f"the RR tachogram has {rr} pixels of its series colour"

    async def pacer():
        # Every phase of the pattern is shown in turn, each with the duration and breath of an emitted cue.
        cues = {}

        def until_all_phases(s):
            p = s["pacer"]
            if p["active"] == "1" and p["phase"]:
                cues[(p["cycle"], p["phase"])] = p
            return {ph for (_, ph) in cues} >= {"inhale", "hold", "exhale"} and len(cues) >= 4

        await tab.poll(SNAPSHOT, until_all_phases, "the pacer did not show inhale, hold and exhale")
        texts = {"inhale": "Breathe in", "hold": "Hold", "exhale": "Breathe out"}
        for (cycle, phase), p in cues.items():
            sent = gw.wait_event(lambda e: e.get("type") == "breathing_cue" and e.get("cycle") == cycle
                                 and e.get("phase") == phase, timeout=1)
            assert sent, f"the page shows breath {cycle} {phase}, which the gateway never cued"
            assert p["durationMs"] == sent["phase_duration_ms"], (p, sent)
            assert p["text"] == texts[phase] and f"breath {cycle}" in p["info"] and PATTERN in p["info"], p
            # A cue sent late (its phase began before it was emitted) animates the rest of its phase.
            rest = sent["phase_duration_ms"] - max(0, sent["emitted_at_ms"] - sent["starts_at_ms"])
            assert abs(float(p["transition"].rstrip("s")) * 1000 - rest) < 1, (p["transition"], sent)
        first = gw.events("breathing_cue")[:3]
        assert [c["phase_duration_ms"] for c in first] == [2000, 1000, 2000], f"the first three cues: {first}"
        snap = await tab.poll(SNAPSHOT, lambda s: s["rsa"] != "–", "no RSA shown for the paced session")
        frame = frame_with_seq(gw, snap["seq"])
        shown_as(snap["rsa"], frame["metrics"].get("rsa_amplitude_bpm"), 1, "RSA")

    async def download(session, format, name):
        """Clicks a session row's download link as a user would; the browser saves the file where DevTools says.
        Returns the file's text."""
        await tab.cdp.call("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": downloads})
        await tab.eval(f'document.querySelector(\'#sessions tr[data-session="{session}"] a[data-format="{format}"]\').click()')
        path = os.path.join(downloads, name)
        deadline = time.monotonic() + STEP_TIMEOUT
        while not os.path.exists(path) and time.monotonic() < deadline:
            await asyncio.sleep(POLL_INTERVAL)
        assert os.path.exists(path), f"no download at {path}: {os.listdir(downloads)}"
        await asyncio.sleep(0.5)  # the file appears, then is written
        with open(path) as f:
            return f.read()

    async def sessions_and_download():
        snap = await tab.poll(SNAPSHOT, lambda s: any(x["id"] == s["session"] for x in s["sessions"]),
                              "the running session is not in the session list")
        (row,) = [x for x in snap["sessions"] if x["id"] == snap["session"]]
        assert PATTERN in row["text"] and all(f in row["text"] for f in ("CSV", "EDF", "JSON")), row
        rows = (await download(snap["session"], "csv", f"session-{snap['session']}.csv")).splitlines()
        assert rows[0] == "session_id,device_id,beat_time_ms,rr_ms,rr_1024,hr_bpm,contact,segment_start", rows[:1]
        csv_rr = [float(r.split(",")[3]) for r in rows[1:]]
        # The store may hold a reading the gateway has not printed in a frame yet: wait for the next frame.
        last_seq = max((e["seq"] for e in gw.events("biosignal_frame")), default=0)
        assert gw.wait_event(lambda e: e.get("type") == "biosignal_frame" and e.get("seq", 0) > last_seq), \
            "no biosignal_frame after the download"
        emitted = {}
        for e in gw.events("biosignal_frame"):
            for x in e["samples"]:
                emitted[(x["timestamp_ms"], x["device_id"])] = x.get("rr_intervals_ms", [])
        sent_rr = [rr for key in sorted(emitted) for rr in emitted[key]]
        assert len(csv_rr) >= 10 and csv_rr == sent_rr[:len(csv_rr)], \
            f"the CSV's {len(csv_rr)} RR values are not the first ones emitted: {csv_rr[:8]} vs {sent_rr[:8]}"
        assert all(r.split(",")[0] == snap["session"] for r in rows[1:]), "rows of another session"

    async def no_raw_json():
        snap = await tab.eval(SNAPSHOT)
        assert not re.search(r'[{\[]\s*"', snap["bodyText"]), f"raw JSON on screen: {snap['bodyText'][:400]}"

    async def charts_and_hrv_trend():
        hrv = await tab.eval(f"{SERIES_PIXELS}('hrv-chart', [85, 221, 136])")
        assert hrv >= 50, f"the RMSSD trend has {hrv} pixels of its series colour"

    async def screenshot(target, name):
        shot = await target.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        os.makedirs(SCREENSHOTS, exist_ok=True)
        with open(os.path.join(SCREENSHOTS, name), "wb") as f:
            f.write(base64.b64decode(shot["data"]))

    async def reload_draws_charts():
        # A reload loses the page's state; it asks for the last 5 minutes of frames (hello recent_frames_ms), so the
        # heart-rate chart and the RMSSD trend hold points from before the reload, at once.
        await tab.navigate(base)
        loaded = await tab.eval("performance.timeOrigin")
        oldest = await tab.poll("hrPoints.length ? hrPoints[0].t : 0", lambda t: t > 0,
                                "no heart-rate points after a reload")
        assert oldest < loaded - 10000, f"the oldest point ({oldest}) is not from well before the reload ({loaded})"
        points = await tab.eval("hrPoints.map((p) => p.t)")
        assert points == sorted(points) and len(set(points)) == len(points), "replayed points out of order or repeated"
        emitted = {f["emitted_at_ms"] for f in gw.events("session_frame")}
        assert set(points) <= emitted, f"points that no emitted frame has: {sorted(set(points) - emitted)[:5]}"
        hr = await tab.eval(f"{SERIES_PIXELS}('hr-chart', {list(HR_RGB)})")
        assert hr >= 100, f"the heart-rate chart has {hr} pixels of its series colour after a reload"
        # The RR tachogram too: the replayed biosignal frames bring beats from before the reload.
        beats = await tab.poll("rrSamples.size ? Math.min(...[...rrSamples.values()].map((s) => s.t)) : 0",
                               lambda t: t > 0, "no RR beats after a reload")
        assert beats < loaded - 10000, f"the oldest beat ({beats}) is not from well before the reload ({loaded})"
        sampled = {s["timestamp_ms"] for f in gw.events("biosignal_frame") for s in f.get("samples", [])}
        kept = await tab.eval("[...rrSamples.values()].map((s) => s.t)")
        assert set(kept) <= sampled, f"beats that no emitted sample has: {sorted(set(kept) - sampled)[:5]}"

    async def phone():
        await tab.call("Emulation.setDeviceMetricsOverride", PHONE)
        await tab.navigate(base)  # the token is kept by the page (localStorage)
        snap = await tab.poll(SNAPSHOT, lambda s: s["seq"] and s["hrSource"] == "sample" and s["rmssd"] != "–",
                              "no live numbers at phone size")
        check_frame(snap, frame_with_seq(gw, snap["seq"]))
        check_big_number(snap, gw)
        lay = snap["layout"]
        assert lay["scrollWidth"] <= lay["innerWidth"], f"the page is wider than the phone: {lay}"
        assert lay["hrFont"] >= 64 and 0 <= lay["hrTop"] and lay["hrBottom"] <= lay["innerHeight"], \
            f"the heart rate is not large and in view on a phone: {lay}"
        await tab.poll(SNAPSHOT, lambda s: s["pacer"]["active"] == "1", "no pacer at phone size")
        if SCREENSHOTS:
            await screenshot(tab, "phone.png")
        await tab.call("Emulation.setDeviceMetricsOverride", DESKTOP)

    async def empty_state():
        await empty_tab.navigate(f"http://127.0.0.1:{empty_gw.port}/")
        snap = await empty_tab.poll(SNAPSHOT, lambda s: s["conn"] == "connected" and s["empty"],
                                    "no empty state on a gateway without a session")
        assert snap["hr"] == "–" and snap["seq"] is None and snap["pacer"]["active"] == "0", snap
        assert "hr-gateway stream" in snap["bodyText"] and "No session is running" in snap["bodyText"]
        await empty_tab.poll("document.getElementById('sessions-note').textContent", lambda t: "No recorded sessions" in t,
                             "the empty session list is not said")
        if SCREENSHOTS:
            await screenshot(empty_tab, "empty.png")
        # The gateway goes away: the page says the connection is lost and that it retries.
        empty_gw.stop()
        snap = await empty_tab.poll(SNAPSHOT, lambda s: "connection lost, retrying" in s["conn"],
                                    "a lost connection is not said")

    async def overlay_page():
        await overlay.navigate(f"{base}overlay?color=00ff66&size=90#token={token}")
        snap = await overlay.poll(OVERLAY, lambda s: s["seq"] and s["source"] == "sample" and s["text"] != "–",
                                  "the overlay shows no heart rate from a sample")
        frame = gw.wait_event(lambda e: e.get("type") == "biosignal_frame" and e.get("seq") == snap["seq"])
        assert frame, f"the gateway printed no biosignal_frame with seq {snap['seq']}"
        newest = max(frame["samples"], key=lambda x: x["timestamp_ms"])
        shown_as(snap["text"], newest["bpm"], 0, "overlay heart rate")
        assert snap["bodyBackground"] == "rgba(0, 0, 0, 0)" and snap["htmlBackground"] == "rgba(0, 0, 0, 0)", snap
        assert snap["color"] == "rgb(0, 255, 102)" and snap["fontSize"] == "90px" and snap["unit"] == "bpm", snap
        period = float(snap["period"].rstrip("s"))
        assert snap["beating"] and abs(period - 60 / newest["bpm"]) < 0.01, f"heart beat period {snap['period']}"
        await overlay.navigate(f"{base}overlay?metric=rmssd&label=0#token={token}")
        snap = await overlay.poll(OVERLAY, lambda s: s["seq"] and s["text"] != "–", "the overlay shows no RMSSD")
        shown_as(snap["text"], frame_with_seq(gw, snap["seq"])["metrics"]["rmssd_ms"], 0, "overlay RMSSD")
        assert snap["source"] == "frame" and snap["unit"] == "", snap
        # A mistyped ?device= shows nothing (it showed the session's strap), however many frames come.
        await overlay.navigate(f"{base}overlay?metric=rmssd&device=no-such-strap#token={token}")
        after = max(e["seq"] for e in gw.events("session_frame"))
        await overlay.poll("Number(document.body.dataset.frameSeq || 0)", lambda n: n >= after + 2,
                           "the overlay handled no more frames")
        snap = await overlay.eval(OVERLAY)
        assert snap["text"] == "–" and snap["seq"] is None, f"a mistyped device shows {snap}"
        # At a phone size too: the number fits the screen.
        await overlay.call("Emulation.setDeviceMetricsOverride", PHONE)
        await overlay.navigate(f"{base}overlay?size=120#token={token}")
        snap = await overlay.poll(OVERLAY, lambda s: s["seq"] and s["text"] != "–", "the overlay shows nothing on a phone")
        fits = await overlay.eval("""(() => { const r = document.getElementById("value").getBoundingClientRect();
            return r.left >= 0 && r.right <= innerWidth && r.top >= 0 && r.bottom <= innerHeight
              && document.documentElement.scrollWidth <= innerWidth; })()""")
        assert fits, "the overlay's number does not fit a phone's screen"
        if SCREENSHOTS:
            await screenshot(overlay, "overlay-phone.png")
        await overlay.call("Emulation.clearDeviceMetricsOverride")
        await overlay.navigate(f"{base}overlay#token=hrg_not_a_real_token")
        snap = await overlay.poll(OVERLAY, lambda s: s["conn"] == "refused", "the overlay does not mark a refused token")
        assert snap["text"] == "–", snap

    async def two_straps():
        two = f"http://127.0.0.1:{two_gw.port}/"
        await two_tab.navigate(two)
        # Two raw frames after the first one shown: the page has had a session_frame by then, whenever it joined.
        first = await two_tab.poll(SNAPSHOT, lambda s: s["seq"] and s["hrSource"] == "sample",
                                   "no reading of the two-strap session shown")
        snap = await two_tab.poll(SNAPSHOT, lambda s: s["hrSource"] == "sample" and s["hrSeq"] >= first["hrSeq"] + 2,
                                  "the two-strap session's readings stopped")
        frame = two_gw.wait_event(lambda e: e.get("type") == "session_frame" and e.get("seq") == snap["seq"])
        assert frame and frame["metrics"].get("primary_device") == STRAP_A, f"top level of the shown frame: {frame}"
        assert set(frame["metrics"].get("devices", {})) == {STRAP_A, STRAP_B}, frame["metrics"].keys()
        shown_as(snap["hrMean"], 60, 0, "window mean (strap A's alone, not the two straps' 105)")
        shown_as(snap["hr"], 60, 0, "big heart rate of strap A (B's notification is the newest)")
        assert snap["hrDevice"] == STRAP_A, f"the big number is {snap['hrDevice']}'s reading"
        # Live DFA alpha1: the frame's (strap A's), with where it stands against 0.75 and 0.5.
        snap = await two_tab.poll(SNAPSHOT, lambda s: s["dfa"] != "–", "no live DFA alpha1 shown", timeout=40)
        x = frame_with_seq(two_gw, snap["seq"])["metrics"]
        assert x["live_dfa_alpha1"] == x["devices"][STRAP_A]["live_dfa_alpha1"], "the top level's alpha1 is A's"
        shown_as(snap["dfa"], x["live_dfa_alpha1"], 2, "live DFA alpha1")
        a = x["live_dfa_alpha1"]
        zone = "aerobic" if a >= 0.75 else "past the aerobic threshold" if a >= 0.5 else "past the anaerobic threshold"
        assert snap["dfaZone"] == zone, f"alpha1 {a}: page says {snap['dfaZone']!r}"
        # The straps table: one row per strap with its own values, A marked as the one above.
        rows = {r["device"]: r for r in snap["straps"] or []}
        assert set(rows) == {STRAP_A, STRAP_B} and rows[STRAP_A]["primary"] and not rows[STRAP_B]["primary"], snap["straps"]
        for device, r in rows.items():
            d = x["devices"][device]
            shown_as(r["cells"][1].removesuffix(" bpm"), d["hr_mean_bpm"], 0, f"{device}'s mean")
            shown_as(r["cells"][2].removesuffix(" ms"), d["rmssd_ms"], 0, f"{device}'s RMSSD")
            shown_as(r["cells"][3], d.get("live_dfa_alpha1"), 2, f"{device}'s alpha1")
        if SCREENSHOTS:
            await screenshot(two_tab, "two-straps.png")
        # The overlay: the top-level strap's by default; one strap's with ?device=.
        await two_tab.navigate(f"{two}overlay")
        first = await two_tab.poll(OVERLAY, lambda s: s["source"] == "sample" and s["text"] != "–",
                                   "the overlay shows no reading of the two-strap session")
        snap = await two_tab.poll(OVERLAY, lambda s: s["source"] == "sample" and s["seq"] >= first["seq"] + 2,
                                  "the overlay's readings of the two-strap session stopped")
        assert snap["text"] == "60" and snap["device"] == STRAP_A, snap
        await two_tab.navigate(f"{two}overlay?device={STRAP_B}")
        snap = await two_tab.poll(OVERLAY, lambda s: s["source"] == "sample" and s["text"] != "–",
                                  "the overlay shows no reading of strap B")
        assert snap["device"] == STRAP_B and snap["text"] == "150", snap
        await two_tab.navigate(f"{two}overlay?metric=rmssd&device={STRAP_B}")
        snap = await two_tab.poll(OVERLAY, lambda s: s["seq"] and s["text"] != "–", "the overlay shows no RMSSD of strap B")
        b = frame_with_seq(two_gw, snap["seq"])["metrics"]["devices"][STRAP_B]
        shown_as(snap["text"], b["rmssd_ms"], 0, "overlay RMSSD of strap B")
        assert snap["source"] == "frame", snap
        await two_tab.navigate(f"{two}overlay?metric=dfa&device={STRAP_A}")
        snap = await two_tab.poll(OVERLAY, lambda s: s["seq"] and s["text"] != "–", "the overlay shows no alpha1 of strap A")
        shown_as(snap["text"], frame_with_seq(two_gw, snap["seq"])["metrics"]["devices"][STRAP_A]["live_dfa_alpha1"], 2,
                 "overlay alpha1 of strap A")
        assert snap["unit"] == "α1", snap

    async def only_local_requests():
        local = tuple(f"{scheme}://127.0.0.1:{port}/" for port in (gw.port, empty_gw.port, two_gw.port)
                      for scheme in ("http", "ws"))
        assert f"ws://127.0.0.1:{gw.port}/v1/relay" in tab.requests, tab.requests
        assert any(u.startswith(base) for u in tab.requests), tab.requests
        pages = tab.requests + bad.requests + overlay.requests + empty_tab.requests + two_tab.requests
        foreign = [u for u in pages if not u.startswith(local) and not u.startswith("data:")]
        assert not foreign, f"requests outside 127.0.0.1:{gw.port}: {foreign}"
        errors = tab.errors + bad.errors + overlay.errors + empty_tab.errors + two_tab.errors
        assert not errors, f"script errors: {errors}"

    async def summary_on_sigterm():
        code = gw.stop()
        assert code == 0, f"the gateway exited with {code} on SIGTERM; stderr:\n{gw.err.tail()}"
        summaries = gw.events("session_summary")
        assert len(summaries) == 1, f"{len(summaries)} session_summary events on stdout"
        x = summaries[0]["metrics"]
        snap = await tab.poll(SNAPSHOT, lambda s: s["summary"] != "–", "no session summary shown", timeout=10)
        m = re.match(r"(\S+): (\d+) s, mean (\S+) bpm", snap["summary"])
        assert m and m.group(1) == summaries[0]["session_id"], snap["summary"]
        shown_as(m.group(3), x["hr_mean_bpm"], 0, "summary heart rate")

    await check("live HR, RMSSD and SDNN equal an emitted session_frame", live_numbers())
    await check("RR tachogram holds every emitted beat", tachogram())
    await check("sensor state shows the simulated strap streaming", sensor_state())
    await check("a wrong token shows an authentication failure, no numbers", wrong_token())
    await check("breathing from RR appears; every frame shown on the way equals the emitted one", breathing())
    await check("HR chart and RR tachogram are drawn", charts())
    await check("the RMSSD trend is drawn", charts_and_hrv_trend())
    await check("the pacer shows each cued phase with its duration and breath; RSA equals the frame's", pacer())
    await check("the session list offers the running session; its CSV download holds the emitted beats",
                sessions_and_download())
    async def ecg_download():
        snap = await tab.poll(SNAPSHOT, lambda s: any(x["id"] == ECG_SESSION for x in s["sessions"]),
                              "the recorded ECG session is not in the session list")
        (row,) = [x for x in snap["sessions"] if x["id"] == ECG_SESSION]
        assert "ECG CSV" in row["text"] and "ACC CSV" not in row["text"], row
        (live,) = [x for x in snap["sessions"] if x["id"] == snap["session"]]
        assert "ECG CSV" not in live["text"], f"the simulated session offers ECG: {live}"
        got = await download(ECG_SESSION, "ecg-csv", f"session-{ECG_SESSION}.ecg.csv")
        assert got == ecg_csv and got.count("\n") == 130 * 5 + 1, \
            f"the download differs from `sessions export --format ecg-csv` ({got.count(chr(10))} lines)"

    await check("a session with raw ECG offers an ECG CSV; its download is the ecg-csv export", ecg_download())
    await check("no raw JSON on screen", no_raw_json())
    if SCREENSHOTS:
        await check(f"desktop screenshot saved in {SCREENSHOTS}", screenshot(tab, "desktop.png"))
    await check("after a reload the heart-rate chart and the RR tachogram hold what was emitted before it (hello recent_frames_ms)",
                reload_draws_charts())
    await check("at a phone size (390x844): no sideways scrolling, a large heart rate in view, the same numbers",
                phone())
    await check("a gateway without a session: the empty state; a lost connection is said", empty_state())
    await check("the OBS overlay: transparent, the newest reading, colour, size, beat, RMSSD, a mistyped device blank, at a phone size, a refused token",
                overlay_page())
    await check("two straps (60 and 150 bpm): the big number, the mean, live DFA alpha1 and the overlay are the "
                "top-level strap's; ?device= shows the other", two_straps())
    await check("every request stays on 127.0.0.1:PORT (no CDN), no script errors", only_local_requests())
    async def policy_refuses_injected_script():
        # What the Content-Security-Policy is for: a script that reached the page as HTML does not run.
        injected = ("(() => { const s = document.createElement('script'); s.textContent = 'window.__injected = 1';"
                    " document.body.appendChild(s); return window.__injected === 1; })()")
        ran = await tab.eval(injected)
        assert ran is False, "an inline script injected into the dashboard ran: no Content-Security-Policy"
        r = await tab.call("Runtime.evaluate", {"expression": "fetch('/').then(r => [r.headers.get('x-frame-options'), "
                                                "r.headers.get('x-content-type-options')])",
                                                "awaitPromise": True, "returnByValue": True})
        assert r["result"].get("value") == ["DENY", "nosniff"], r

    await check("an inline script injected into the dashboard does not run (its policy), and it may not be framed",
                policy_refuses_injected_script())
    await check("SIGTERM ends the session; the page shows its summary", summary_on_sigterm())


async def main():
    work = tempfile.mkdtemp(prefix="dashboard-test-")
    state, profile = os.path.join(work, "state"), os.path.join(work, "chromium")
    empty_state, downloads = os.path.join(work, "empty-state"), os.path.join(work, "downloads")
    two_state = os.path.join(work, "two-state")
    for d in (state, empty_state, downloads, two_state):
        os.mkdir(d)
    gw = empty_gw = two_gw = browser = cdp = None
    started = time.monotonic()
    report = Report()
    try:
        if not os.access(BINARY, os.X_OK):
            raise SetupError(f"{BINARY} is not an executable: build it with `swift build --product hr-gateway`")
        made = subprocess.run([BINARY, "token", "create", "--name", "dash", "--read-only", "--state-dir", state],
                              capture_output=True, text=True, timeout=60)
        if made.returncode != 0:
            raise SetupError(f"token create failed: {made.stderr}")
        token = made.stdout.splitlines()[-1]
        ecg_csv = record_ecg_session(state, work)
        gw = Gateway(state)
        empty_gw = Gateway(empty_state, ["serve", "--simulate", "--listen", "127.0.0.1:0", "--no-auth"])
        # Ten times real time: the live DFA has its two minutes of beats within the first 12 s.
        two_gw = Gateway(two_state, ["stream", "--replay", two_strap_recording(work), "--replay-speed", "10",
                                     "--listen", "127.0.0.1:0", "--no-auth", "--raw", "--emit-interval", "1",
                                     "--window", "20", "--format", "jsonl"])
        browser = Chromium(profile)
        cdp = await CDP.connect(browser.devtools)
        tab = await Tab.open(cdp)
        await tab.call("Emulation.setDeviceMetricsOverride", DESKTOP)
        bad = await Tab.open(cdp, isolated=True)
        overlay = await Tab.open(cdp, isolated=True)
        empty_tab = await Tab.open(cdp, isolated=True)
        two_tab = await Tab.open(cdp, isolated=True)
        await run_checks(report, gw, tab, bad, overlay, token, empty_gw, empty_tab, downloads, ecg_csv, two_gw, two_tab)
    except SetupError as e:
        print(f"FAIL setup: {e}")
        report.results.append(False)
    except Exception as e:
        report.setup_failed(e)
    finally:
        if cdp:
            try:
                await asyncio.wait_for(cdp.call("Browser.close"), 5)
            except Exception:
                pass
            await cdp.close()
        if browser:
            browser.stop()
        if gw:
            gw.stop()
        if empty_gw:
            empty_gw.stop()
        if two_gw:
            two_gw.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"dashboard check took {time.monotonic() - started:.1f} s")
    return report.summary()


if __name__ == "__main__":
    sys.exit(0 if asyncio.run(main()) else 1)
