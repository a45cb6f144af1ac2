"""The relay's web dashboard (`GET /`) in a real headless browser, Debian's chromium, against a simulated session.

Runs `hr-gateway stream --simulate --listen 127.0.0.1:0 --raw --format jsonl` and takes the events it prints on
standard output as the truth. Chromium is driven over the Chrome DevTools Protocol (a `websockets` client): it opens
`http://127.0.0.1:PORT/#token=TOKEN`, records every request the page makes, and reads the page's elements with
Runtime.evaluate, polling each condition until a deadline. Checks that the numbers shown are those of an emitted
session_frame, that the RR tachogram holds the emitted beats, that the simulated strap shows as streaming, that both
charts are drawn, that no request leaves 127.0.0.1:PORT (no CDN: works offline), that a wrong token shows an
authentication failure instead of numbers, and that SIGTERM ends the session with a summary the page shows.
Prints 'N passed, N failed'; exits non-zero on any failure.
Usage: python3 dashboard_test.py PATH/TO/hr-gateway
  CHROMIUM=PATH overrides /usr/bin/chromium; DASHBOARD_SCREENSHOT=FILE.png saves a screenshot of the live page.
"""

import asyncio
import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

import websockets
from websockets.exceptions import ConnectionClosed

BINARY = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".build/debug/hr-gateway")
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
SCREENSHOT = os.environ.get("DASHBOARD_SCREENSHOT")  # a PNG of the live page, for a person to look at
# RR-derived breathing needs at least 30 s of beats (docs/hrv.md §4): the shortest window that yields it, and the
# time the simulated strap takes to fill it (about 35 s), bound the run.
WINDOW_SEC = 30
BREATHING_DEADLINE = 55  # seconds after the gateway started
STEP_TIMEOUT = 20
POLL_INTERVAL = 0.2


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
    def __init__(self, state):
        self.proc = subprocess.Popen(
            [BINARY, "stream", "--simulate", "--listen", "127.0.0.1:0", "--emit-interval", "1",
             "--window", str(WINDOW_SEC), "--raw", "--format", "jsonl", "--state-dir", state, "--no-record-db"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.started = time.monotonic()
        self.out = Lines(self.proc.stdout)
        self.err = Lines(self.proc.stderr)
        line = self.err.wait_for(lambda l: l.startswith("relay: listening on "), STEP_TIMEOUT)
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
        for domain in ("Network", "Runtime", "Page"):
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
  const m = document.getElementById("metrics"), auth = document.getElementById("auth");
  return {
    seq: m.dataset.seq ? Number(m.dataset.seq) : null, session: m.dataset.session || null,
    hr: t("hr"), rmssd: t("rmssd"), sdnn: t("sdnn"), resp: t("resp"), respSource: t("resp-source"),
    rrSeq: document.getElementById("rr-chart").dataset.seq ? Number(document.getElementById("rr-chart").dataset.seq) : null,
    rrLast: t("rr-last"), beats: t("beats"), conn: t("conn"), sessionText: t("session"), summary: t("summary"),
    sensors: [...document.querySelectorAll("#sensors li")].map((li) => ({
      source: li.dataset.source, device: li.dataset.device, state: li.dataset.state, text: li.textContent})),
    auth: getComputedStyle(auth).display === "none" ? "" : auth.textContent,
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
    shown_as(snap["hr"], x["hr_mean_bpm"], 0, "heart rate")
    shown_as(snap["rmssd"], x["rmssd_ms"], 0, "RMSSD")
    shown_as(snap["sdnn"], x["hr_sdnn_ms"], 0, "SDNN")
    shown_as(snap["resp"], x.get("resp_rate_rr_bpm"), 1, "breathing")


OVERLAY = """(() => {
  const v = document.getElementById("value"), h = document.getElementById("heart");
  const cs = (el) => getComputedStyle(el);
  return {
    text: v.textContent.trim(), seq: v.dataset.seq ? Number(v.dataset.seq) : null, source: v.dataset.source || null,
    unit: document.getElementById("unit").textContent, conn: document.body.dataset.conn,
    bodyBackground: cs(document.body).backgroundColor, htmlBackground: cs(document.documentElement).backgroundColor,
    color: cs(v).color, fontSize: cs(document.body).fontSize, beating: h.classList.contains("beat"),
    period: cs(h).animationDuration,
  };
})()"""


def frame_with_seq(gw, seq):
    return gw.wait_event(lambda e: e.get("type") == "session_frame" and e.get("seq") == seq)


async def run_checks(gw, tab, bad, overlay, token):
    results = []

    async def check(name, body):
        try:
            await body
            results.append(True)
            print(f"PASS {name}", flush=True)
        except Exception as e:
            results.append(False)
            print(f"FAIL {name}: {e}", flush=True)
            if not isinstance(e, AssertionError):
                traceback.print_exc()

    base = f"http://127.0.0.1:{gw.port}/"
    await tab.navigate(f"{base}#token={token}")

    async def live_numbers():
        snap = await tab.poll(SNAPSHOT, lambda s: s["seq"] and s["hr"] != "–" and s["rmssd"] != "–",
                              "no heart rate and RMSSD shown")
        number(snap["hr"], "heart rate")
        number(snap["rmssd"], "RMSSD")
        check_frame(snap, frame_with_seq(gw, snap["seq"]))
        assert snap["conn"] == "connected", snap["conn"]
        assert snap["sessionText"] == snap["session"], (snap["sessionText"], snap["session"])

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
        assert [x.get("state") for x in snap["sensors"]] == [None] and snap["sensors"][0]["text"] == "–", snap["sensors"]
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

    async def screenshot():
        shot = await tab.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        with open(SCREENSHOT, "wb") as f:
            f.write(base64.b64decode(shot["data"]))

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
        await overlay.navigate(f"{base}overlay#token=hrg_not_a_real_token")
        snap = await overlay.poll(OVERLAY, lambda s: s["conn"] == "refused", "the overlay does not mark a refused token")
        assert snap["text"] == "–", snap

    async def only_local_requests():
        local = (f"http://127.0.0.1:{gw.port}/", f"ws://127.0.0.1:{gw.port}/")
        assert f"ws://127.0.0.1:{gw.port}/v1/relay" in tab.requests, tab.requests
        assert any(u.startswith(base) for u in tab.requests), tab.requests
        pages = tab.requests + bad.requests + overlay.requests
        foreign = [u for u in pages if not u.startswith(local) and not u.startswith("data:")]
        assert not foreign, f"requests outside 127.0.0.1:{gw.port}: {foreign}"
        assert not tab.errors and not bad.errors and not overlay.errors, \
            f"script errors: {tab.errors + bad.errors + overlay.errors}"

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
    await check("the OBS overlay: transparent, the newest reading, colour, size, beat, RMSSD, a refused token", overlay_page())
    if SCREENSHOT:
        await check(f"screenshot saved to {SCREENSHOT}", screenshot())
    await check("every request stays on 127.0.0.1:PORT (no CDN), no script errors", only_local_requests())
    await check("SIGTERM ends the session; the page shows its summary", summary_on_sigterm())
    return results


async def main():
    work = tempfile.mkdtemp(prefix="dashboard-test-")
    state, profile = os.path.join(work, "state"), os.path.join(work, "chromium")
    os.mkdir(state)
    gw = browser = cdp = None
    started = time.monotonic()
    try:
        if not os.access(BINARY, os.X_OK):
            raise SetupError(f"{BINARY} is not an executable: build it with `swift build --product hr-gateway`")
        made = subprocess.run([BINARY, "token", "create", "--name", "dash", "--read-only", "--state-dir", state],
                              capture_output=True, text=True, timeout=60)
        if made.returncode != 0:
            raise SetupError(f"token create failed: {made.stderr}")
        token = made.stdout.splitlines()[-1]
        gw = Gateway(state)
        browser = Chromium(profile)
        cdp = await CDP.connect(browser.devtools)
        tab = await Tab.open(cdp)
        bad = await Tab.open(cdp, isolated=True)
        overlay = await Tab.open(cdp, isolated=True)
        results = await run_checks(gw, tab, bad, overlay, token)
    except SetupError as e:
        print(f"FAIL setup: {e}")
        results = [False]
    except Exception as e:
        print(f"FAIL setup: {e!r}")
        traceback.print_exc()
        results = [False]
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
        shutil.rmtree(work, ignore_errors=True)
    passed = sum(results)
    print(f"dashboard check took {time.monotonic() - started:.1f} s")
    print(f"{passed} passed, {len(results) - passed} failed")
    return passed == len(results)


if __name__ == "__main__":
    sys.exit(0 if asyncio.run(main()) else 1)
