"""Interop tests of the hr-gateway relay with an independent WebSocket client (the `websockets` package).

Runs the built binary on 127.0.0.1 with free ports (port 0), as a phone, a dashboard and a laptop would use it.
Every message received is validated against docs/relay-protocol.schema.json. Prints 'N passed, N failed'.
Usage: python3 relay_interop.py PATH/TO/hr-gateway
"""

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import traceback

import jsonschema
import websockets
from websockets.exceptions import ConnectionClosed, InvalidStatus

BINARY = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".build/debug/hr-gateway")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with open(os.path.join(ROOT, "docs", "relay-protocol.schema.json")) as f:
    SCHEMA = json.load(f)
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
TIMEOUT = 30


def check_schema(message):
    errors = sorted(VALIDATOR.iter_errors(message), key=str)
    assert not errors, f"schema: {errors[0].message} in {message}"


def cli(*args, state):
    return subprocess.run([BINARY, *args, "--state-dir", state], capture_output=True, text=True, timeout=60, check=True)


class Gateway:
    """`hr-gateway serve` (or stream --listen) in the background; `url` read from its announcement line."""

    def __init__(self, args, state, announce_on_stderr=False):
        self.proc = subprocess.Popen([BINARY, *args, "--state-dir", state], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        stream = self.proc.stderr if announce_on_stderr else self.proc.stdout
        self.url = None
        for line in stream:
            if line.startswith("relay: listening on "):
                self.url = line.split()[-1]
                break
        assert self.url, f"gateway did not announce its address: {self.proc.stderr.read() if not announce_on_stderr else ''}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


class Consumer:
    def __init__(self, ws):
        self.ws = ws
        self.log = []
        self.taken = set()

    @classmethod
    async def open(cls, url, token=None, **kw):
        headers = {"Authorization": f"Bearer {token}"} if token else None
        ws = await websockets.connect(url, additional_headers=headers, max_size=4 << 20, open_timeout=TIMEOUT, **kw)
        return cls(ws)

    async def send(self, obj):
        await self.ws.send(obj if isinstance(obj, (str, bytes)) else json.dumps(obj))

    async def next(self):
        m = json.loads(await asyncio.wait_for(self.ws.recv(), TIMEOUT))
        assert m is not None and isinstance(m, dict), m
        check_schema(m)
        self.log.append(m)
        return m

    async def until(self, pred):
        """The first message not yet taken that matches, among those received or to come (within TIMEOUT)."""
        for i, m in enumerate(self.log):
            if i not in self.taken and pred(m):
                self.taken.add(i)
                return m
        deadline = asyncio.get_running_loop().time() + TIMEOUT
        while asyncio.get_running_loop().time() < deadline:
            m = await self.next()
            if pred(m):
                self.taken.add(len(self.log) - 1)
                return m
        raise AssertionError("no matching message in time")

    async def result(self, cid):
        return await self.until(lambda m: m.get("type") == "command_result" and m.get("id") == cid)

    async def close(self):
        await self.ws.close()


def start_cmd(sid, cid, duration=600, emit=1):
    return {"command": "start_session", "session_id": sid, "mode": "focus", "duration_sec": duration,
            "profile": {"window_sec": 10, "emit_interval_sec": emit}, "window_label": "interop", "id": cid}


async def expect_status(url, status, **kw):
    try:
        ws = await websockets.connect(url, open_timeout=TIMEOUT, **kw)
    except InvalidStatus as e:
        assert e.response.status_code == status, e.response.status_code
        return
    await ws.close()
    assert False, f"connected, expected HTTP {status}"


# ---------------------------------------------------------------------------------------------------------------

async def test_auth_failures_are_401(g, t):
    await expect_status(g.url, 401)
    await expect_status(g.url, 401, additional_headers={"Authorization": "Bearer hrg_not_a_token"})
    await expect_status(g.url, 401, additional_headers={"Authorization": f"Bearer {t['revoked']}"})
    ok = await websockets.connect(g.url + "?token=" + t["dash"], open_timeout=TIMEOUT)
    await ok.close()
    ok = await websockets.connect(g.url, subprotocols=["hrrelay.v1", "bearer." + t["dash"]], open_timeout=TIMEOUT)
    assert ok.subprotocol == "hrrelay.v1"
    await ok.close()


async def test_read_only_token_is_refused_control(g, t):
    dash = await Consumer.open(g.url, t["dash"])
    welcome = await dash.next()
    assert welcome["type"] == "welcome" and welcome["scope"] == "read"
    await dash.send(start_cmd("ro", "ro-1"))
    r = await dash.result("ro-1")
    assert r["ok"] is False and r["error_code"] == "forbidden", r
    await dash.send({"command": "get_status", "id": "ro-2"})
    r = await dash.result("ro-2")
    assert r["ok"] is True and r["active"] is False, r
    await dash.close()


async def test_phone_starts_and_stops_and_a_second_consumer_sees_it(g, t):
    dash = await Consumer.open(g.url, t["dash"])
    await dash.until(lambda m: m["type"] == "gateway_status")
    phone = await Consumer.open(g.url, t["phone"])
    await phone.send(start_cmd("p1", "go"))
    r = await phone.result("go")
    assert r["ok"] is True and r["session_id"] == "p1", r
    # Idempotent by id: a retry answers the same and starts nothing new.
    await phone.send(start_cmd("p1", "go"))
    assert await phone.result("go") == r
    # The running session's id under a new command id: said as running (it was "already recorded", "delete it").
    await phone.send(start_cmd("p1", "go-again"))
    again = await phone.result("go-again")
    assert again["ok"] is False and again["error_code"] == "invalid_state", again
    assert again["message"] == "Session p1 is already running", again
    await phone.until(lambda m: m["type"] == "session_frame")
    await phone.send({"command": "stop_session", "session_id": "p1", "id": "halt"})
    assert (await phone.result("halt"))["ok"] is True
    await phone.until(lambda m: m["type"] == "session_summary")
    await dash.until(lambda m: m["type"] == "session_summary")
    for who in (phone, dash):
        types = [m["type"] for m in who.log]
        assert "session_started" in types and "session_frame" in types and "biosignal_frame" in types, types
        events = [m for m in who.log if "relay_seq" in m]
        assert all(m["session_id"] == "p1" for m in events)
        assert sorted(m["relay_seq"] for m in events) == [m["relay_seq"] for m in events], "in order"
    dash_seqs = {m["relay_seq"] for m in dash.log if "relay_seq" in m}
    phone_seqs = {m["relay_seq"] for m in phone.log if "relay_seq" in m}
    assert phone_seqs <= dash_seqs, "the dashboard, connected first, saw everything the phone saw"
    for c in (phone, dash):
        await c.send({"command": "ack", "relay_seq": max(m["relay_seq"] for m in c.log if "relay_seq" in m)})
        await c.close()


async def test_reconnect_redelivers_reliable_and_hello_resumes_samples(g, t):
    dash = await Consumer.open(g.url, t["dash"])
    await dash.until(lambda m: m["type"] == "gateway_status")
    phone = await Consumer.open(g.url, t["phone"])
    welcome = await phone.next()
    await phone.send(start_cmd("p2", "go2"))
    await phone.until(lambda m: m["type"] == "biosignal_frame")
    await phone.until(lambda m: m["type"] == "biosignal_frame")
    seen = [m for m in phone.log if "relay_seq" in m]
    await phone.ws.close()  # the link drops: session_started was never acknowledged
    # Away while the session goes on: the dashboard (a live consumer) counts three more frames, then a laptop stops it.
    for _ in range(3):
        await dash.until(lambda m: m["type"] == "biosignal_frame")
    laptop = await Consumer.open(g.url, t["laptop"])
    await laptop.send({"command": "stop_session", "session_id": "p2", "id": "stop2"})
    assert (await laptop.result("stop2"))["ok"] is True
    await dash.until(lambda m: m["type"] == "session_summary")

    back = await Consumer.open(g.url, t["phone"])
    w2 = await back.next()
    assert w2["type"] == "welcome" and w2["epoch"] == welcome["epoch"]
    await back.send({"command": "hello", "resume": {"epoch": w2["epoch"], "last_seq": seen[-1]["relay_seq"]}, "id": "h"})
    h = await back.result("h")
    assert h["ok"] is True and h["complete"] is True, h
    await back.until(lambda m: m.get("type") == "session_summary" and not m.get("replayed"))
    # Replayed live frames come with the reply; drain until every replayed frame counted in the reply arrived.
    while sum(1 for m in back.log if m.get("replayed")) < h["replayed"]:
        await back.next()
    reliable = [m["type"] for m in back.log if m.get("delivery") == "reliable"]
    assert reliable == ["session_started", "session_summary"], reliable
    live_before = [m["relay_seq"] for m in seen if m["delivery"] == "live"]
    live_after = [m["relay_seq"] for m in back.log if m.get("delivery") == "live" and "relay_seq" in m]
    assert not set(live_before) & set(live_after), "nothing repeated"
    assert len(set(live_after)) == len(live_after), "nothing repeated after the reconnect"
    dash_live = {m["relay_seq"] for m in dash.log if m.get("delivery") == "live" and m.get("session_id") == "p2"}
    phone_live = set(live_before) | set(live_after)
    assert dash_live <= phone_live, f"lost: {sorted(dash_live - phone_live)}"
    samples = [m["seq"] for m in seen + back.log if m.get("type") == "biosignal_frame"]
    assert sorted(samples) == list(range(1, max(samples) + 1)), f"biosignal frames: {sorted(samples)}"
    await back.send({"command": "ack", "relay_seq": max(m["relay_seq"] for m in back.log if "relay_seq" in m)})
    await back.close()
    await dash.close()
    await laptop.close()
    # Acknowledged: a later connection gets no reliable event again.
    again = await Consumer.open(g.url, t["phone"])
    await again.next()
    await again.next()
    await again.send({"command": "get_status", "id": "s"})
    await again.result("s")
    assert not [m for m in again.log if m.get("delivery") == "reliable"], again.log
    await again.close()


async def test_bad_commands_get_clear_errors_and_the_session_keeps_running(g, t):
    phone = await Consumer.open(g.url, t["phone"])
    await phone.send(start_cmd("fz", "fz-start"))
    assert (await phone.result("fz-start"))["ok"] is True
    cases = [
        ("{", "bad_json"), ("[]", "bad_request"), ("null", "bad_request"), ("42", "bad_request"),
        ('{"command": 1}', "bad_request"), ('{"id": "x"}', "bad_request"),
        ('{"command": "reboot", "id": "fz-u"}', "unknown_command"),
        ('{"command": "start_session", "id": [1]}', "bad_request"),
        ('{"command": "start_session", "session_id": "x", "mode": "nap", "duration_sec": 5, "id": "fz-m"}', "bad_request"),
        ('{"command": "stop_session", "session_id": 3, "id": "fz-s"}', "bad_request"),
        ('{"command": "ingest_hsi_metrics", "metrics": "x", "id": "fz-i"}', "bad_request"),
        ('{"command": "ack", "relay_seq": "x"}', "bad_request"),
        ("[" * 10000, "bad_json"),
        (json.dumps({"command": "get_status", "pad": "a" * 100_000}), "payload_too_large"),
        ('{"command":"get_status"}' + "\x00", "bad_json"),
    ]
    for text, code in cases:
        await phone.send(text)
        r = await phone.until(lambda m: m["type"] == "command_result" and m.get("ok") is False)
        assert r["error_code"] == code and r["message"], (text[:40], r)
    # An id reused for a different command is refused rather than answered with the other command's result.
    await phone.send({"command": "get_status", "id": "fz-start"})
    r = await phone.result("fz-start")
    assert r["ok"] is False and r["error_code"] == "id_reused", r
    await phone.send(b"\x00\x01binary")
    r = await phone.until(lambda m: m["type"] == "command_result" and m.get("ok") is False)
    assert r["error_code"] == "bad_request"
    await phone.send({"command": "get_status", "id": "alive"})
    r = await phone.result("alive")
    assert r["active"] is True and r["session_id"] == "fz", r
    frames = sum(1 for m in phone.log if m["type"] == "session_frame")
    await phone.until(lambda m: m["type"] == "session_frame")
    assert sum(1 for m in phone.log if m["type"] == "session_frame") > frames
    # A frame over the WebSocket limit (1 MiB) closes that connection only. The relay may close it while the frame is
    # still being sent: then the send itself ends with the close.
    try:
        await phone.send("x" * (2 << 20))
        while True:
            await phone.next()
    except ConnectionClosed as e:
        assert e.rcvd is None or e.rcvd.code in (1009, 1002, 1006), e
    other = await Consumer.open(g.url, t["phone"])
    await other.send({"command": "stop_session", "session_id": "fz", "id": "fz-stop"})
    assert (await other.result("fz-stop"))["ok"] is True
    await other.until(lambda m: m["type"] == "session_summary")
    await other.send({"command": "ack", "relay_seq": max(m["relay_seq"] for m in other.log if "relay_seq" in m)})
    await other.close()


async def test_revoking_a_token_closes_its_open_connections(g, t, state):
    temp = cli("token", "create", "--name", "borrowed", state=state).stdout.splitlines()[-1]
    doomed = await Consumer.open(g.url, temp)
    other = await Consumer.open(g.url, t["dash"])
    await doomed.until(lambda m: m["type"] == "gateway_status")
    await other.until(lambda m: m["type"] == "gateway_status")
    cli("token", "revoke", "borrowed", state=state)
    try:
        while True:
            await doomed.next()
    except ConnectionClosed as e:
        assert e.rcvd is not None and e.rcvd.code == 1008 and "revoked" in e.rcvd.reason, e
    await expect_status(g.url, 401, additional_headers={"Authorization": f"Bearer {temp}"})
    await other.send({"command": "get_status", "id": "still-here"})
    assert (await other.result("still-here"))["type"] == "command_result"
    await other.close()


def test_attach_plays_the_phone(g, t):
    out = subprocess.run([BINARY, "attach", g.url, "--token", t["phone"], "--start", "focus", "--duration", "3",
                          "--emit-interval", "1", "--session-id", "att"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    for m in lines:
        check_schema(m)
    types = [m["type"] for m in lines]
    assert types[0] == "welcome" and types[-1] == "session_summary", types
    assert "session_frame" in types
    out = subprocess.run([BINARY, "attach", g.url, "--token", "hrg_bad", "--until-summary"],
                         capture_output=True, text=True, timeout=60)
    # The relay answered 401: attach says what that means and where tokens come from.
    assert out.returncode == 1 and "the token is wrong or revoked" in out.stderr, out.stderr


async def test_stream_listen_publishes_its_own_session(state, t):
    g = Gateway(["stream", "--simulate", "--duration", "4", "--emit-interval", "1", "--format", "jsonl",
                 "--session-id", "own", "--listen", "127.0.0.1:0"], state, announce_on_stderr=True)
    c = await Consumer.open(g.url, t["dash"])
    await c.until(lambda m: m["type"] == "session_summary" and m["session_id"] == "own")
    # Reliable events of earlier gateways on this state directory that the token never acknowledged come first.
    own = [i for i, m in enumerate(c.log) if m.get("session_id") == "own"]
    assert all(m["delivery"] == "reliable" for m in c.log[:own[0]] if "relay_seq" in m), c.log[:own[0]]
    assert all(m["session_id"] == "own" for m in c.log[own[0]:] if "relay_seq" in m)
    try:  # stream ends with its session: the gateway may already be closing this link
        await c.send({"command": "ack", "relay_seq": max(m["relay_seq"] for m in c.log if "relay_seq" in m)})
        await c.close()
    except ConnectionClosed:
        pass
    code = g.stop()
    assert code == 0, (code, g.proc.stderr.read())
    printed = [json.loads(line) for line in g.proc.stdout.read().splitlines() if line.startswith("{")]
    assert printed and printed[-1]["type"] == "session_summary"


async def test_a_summary_missed_before_a_restart_is_delivered_after_it():
    state = tempfile.mkdtemp(prefix="relay-restart-")
    token = cli("token", "create", "--name", "phone", state=state).stdout.splitlines()[-1]
    g1 = Gateway(["serve", "--simulate", "--listen", "127.0.0.1:0"], state)
    try:
        phone = await Consumer.open(g1.url, token)
        await phone.send(start_cmd("before", "b1", duration=2))
        summary = await phone.until(lambda m: m["type"] == "session_summary")
        started = next(m for m in phone.log if m["type"] == "session_started")
        await phone.close()  # gone without acknowledging, like a phone put away mid-transfer
    finally:
        assert g1.stop() == 0
    g2 = Gateway(["serve", "--simulate", "--listen", "127.0.0.1:0"], state)
    try:
        back = await Consumer.open(g2.url, token)
        welcome = await back.next()
        assert welcome["epoch"] != phone.log[0]["epoch"], "a restart starts a new epoch"
        assert welcome["relay_seq_last"] >= summary["relay_seq"], "relay_seq never goes back"
        redelivered = [await back.until(lambda m: m.get("delivery") == "reliable") for _ in range(2)]
        assert redelivered == [started, summary], redelivered
        # A stop_session retried across the restart (its reply lost): the session ended, as recorded.
        await back.send({"command": "stop_session", "session_id": "before", "id": "retry"})
        retried = await back.result("retry")
        assert retried["ok"] is True and retried.get("already_ended") is True, retried
        await back.send({"command": "stop_session", "session_id": "never", "id": "nope"})
        assert (await back.result("nope"))["error_code"] == "invalid_state"
        await back.send(start_cmd("after", "a1", duration=1))
        fresh = await back.until(lambda m: m["type"] == "session_started")
        assert fresh["relay_seq"] > summary["relay_seq"], (fresh, summary)
        last = (await back.until(lambda m: m["type"] == "session_summary"))["relay_seq"]
        await back.send({"command": "ack", "relay_seq": last})
        await back.send({"command": "get_status", "id": "sync"})
        await back.result("sync")  # the ack is handled before this answer
        await back.close()
    finally:
        assert g2.stop() == 0
    g3 = Gateway(["serve", "--simulate", "--listen", "127.0.0.1:0"], state)
    try:
        again = await Consumer.open(g3.url, token)
        await again.send({"command": "get_status", "id": "s"})
        await again.result("s")
        assert not [m for m in again.log if m.get("delivery") == "reliable"], "acknowledged events are gone for good"
        await again.close()
    finally:
        assert g3.stop() == 0


async def test_connect_mode_dials_out_and_takes_commands(state):
    """A phone-side server (websockets) that the gateway dials: it checks the bearer token, starts a session, and
    receives the events; it drops the first link after session_started to check the redelivery on reconnect."""
    got = []
    links = []
    done = asyncio.get_running_loop().create_future()

    async def phone_side(ws):
        assert ws.request.headers.get("Authorization") == "Bearer uplink-secret", ws.request.headers
        links.append(ws)
        if len(links) == 1:
            await ws.send(json.dumps(start_cmd("up", "up-1", duration=3)))
        async for text in ws:
            m = json.loads(text)
            check_schema(m)
            got.append((len(links), m))
            if len(links) == 1 and m.get("type") == "command_result" and m.get("id") == "up-1":
                await ws.close()  # the link drops before anything is acknowledged
                return
            if m.get("type") == "session_summary" and not done.done():
                await ws.send(json.dumps({"command": "ack", "relay_seq": m["relay_seq"]}))
                done.set_result(True)

    async with websockets.serve(phone_side, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        proc = subprocess.Popen([BINARY, "serve", "--simulate", "--connect", f"ws://127.0.0.1:{port}/gateway",
                                 "--connect-token", "uplink-secret", "--state-dir", state],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            await asyncio.wait_for(done, TIMEOUT)
        finally:
            proc.send_signal(signal.SIGTERM)
            code = await asyncio.to_thread(proc.wait, 30)
    assert code == 0, code
    first = [m for n, m in got if n == 1]
    second = [m for n, m in got if n == 2]
    assert any(m.get("type") == "command_result" and m.get("id") == "up-1" and m["ok"] for m in first), first
    assert any(m.get("type") == "session_started" for m in first), first
    reliable = [m["type"] for m in second if m.get("delivery") == "reliable"]
    assert reliable[:1] == ["session_started"] and "session_summary" in reliable, reliable


async def test_stream_connect_reaches_a_late_server_and_resumes_after_a_drop():
    """`stream --connect` to a phone-side server that is not up yet: the gateway retries with backoff, the server
    gets session_started once it is up, drops the link after a few frames, and on the next link resumes with
    hello; every biosignal frame arrives exactly once, the summary arrives, and stream exits 0."""
    import socket
    state = tempfile.mkdtemp(prefix="relay-uplink-")
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    proc = subprocess.Popen([BINARY, "stream", "--simulate", "--duration", "8", "--emit-interval", "1", "--raw",
                             "--format", "jsonl", "--session-id", "up2", "--no-record-db",
                             "--connect", f"ws://127.0.0.1:{port}/phone", "--token", "s3cret", "--state-dir", state],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    refused = await asyncio.to_thread(lambda: next(l for l in proc.stderr if "cannot connect" in l))
    assert "127.0.0.1" in refused, refused
    links = []
    got = []
    done = asyncio.get_running_loop().create_future()

    async def phone_side(ws):
        assert ws.request.headers.get("Authorization") == "Bearer s3cret", ws.request.headers
        links.append(ws)
        n = len(links)
        async for text in ws:
            m = json.loads(text)
            check_schema(m)
            got.append((n, m))
            if n == 1 and m.get("type") == "welcome":
                epoch = m["epoch"]
            if n == 1 and sum(1 for k, x in got if k == 1 and x.get("type") == "biosignal_frame") == 2:
                await ws.close()
                return
            if n == 2 and m.get("type") == "welcome":
                last = max(x["relay_seq"] for k, x in got if k == 1 and "relay_seq" in x)
                await ws.send(json.dumps({"command": "hello", "resume": {"epoch": m["epoch"], "last_seq": last},
                                          "id": "resume"}))
            if m.get("type") == "session_summary" and not done.done():
                await ws.send(json.dumps({"command": "ack", "relay_seq": m["relay_seq"]}))
                done.set_result(True)

    async with websockets.serve(phone_side, "127.0.0.1", port):
        try:
            await asyncio.wait_for(done, TIMEOUT)
        except asyncio.TimeoutError:
            proc.kill()
            raise AssertionError(f"no summary; links {len(links)}, got {[m.get('type') for _, m in got]}; "
                                 f"stderr: {proc.stderr.read()}")
        code = await asyncio.to_thread(proc.wait, 30)
    assert code == 0, (code, proc.stderr.read())
    assert len(links) >= 2, len(links)
    first = [m for n, m in got if n == 1]
    later = [m for n, m in got if n > 1]
    assert [m["type"] for m in first if m.get("delivery") == "reliable"] == ["session_started"], first
    hello = next(m for m in later if m.get("type") == "command_result" and m.get("id") == "resume")
    assert hello["ok"] and hello["complete"], hello
    frames = [m["seq"] for m in first + later if m.get("type") == "biosignal_frame"]
    assert sorted(frames) == list(range(1, max(frames) + 1)), f"biosignal frames lost or repeated: {sorted(frames)}"
    printed = [json.loads(line) for line in proc.stdout.read().splitlines() if line.startswith("{")]
    relayed = next(m for m in later if m.get("type") == "session_summary")
    assert printed[-1]["type"] == "session_summary" and printed[-1]["metrics"] == relayed["metrics"]
    # The gateway waited for the acknowledgement before closing: nothing is left to send the next time.
    import sqlite3
    with sqlite3.connect(os.path.join(state, "relay.sqlite")) as db:
        assert db.execute("SELECT COUNT(*) FROM events").fetchone()[0] == 0


async def test_stream_connect_pins_a_self_signed_far_end():
    """`stream --connect wss://… --pin` reaches a far end with a self-signed certificate when the pin matches, and
    refuses it, saying why, when it does not. The far end's certificate and key are the ones `token create --tls` makes
    (swift-certificates), loaded here by Python's ssl (OpenSSL), whose own hash of the DER must match the fingerprint
    the gateway printed."""
    import hashlib
    import ssl
    state = tempfile.mkdtemp(prefix="relay-uplink-tls-")
    far_state = tempfile.mkdtemp(prefix="relay-far-end-")
    made = subprocess.run([BINARY, "token", "create", "--name", "far", "--tls", "--state-dir", far_state],
                          check=True, capture_output=True, text=True)
    printed = [line.split()[-1] for line in made.stdout.splitlines() if "SHA-256" in line]
    cert, key = os.path.join(far_state, "tls", "cert.pem"), os.path.join(far_state, "tls", "key.pem")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    der = ssl.PEM_cert_to_DER_cert(open(cert).read())
    pin = ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())
    assert printed == [pin], (printed, pin, made.stdout)
    got = []
    # The far end's own log. With --pin the gateway first fetches the certificate in a TLS handshake of its own and
    # hangs up before any HTTP request (RelayPinning), then opens the WebSocket connection trusting that certificate
    # alone, or gives up when the pin does not match. websockets logs each such probe as "opening handshake failed"
    # with a traceback: they are expected, so they are collected and checked here rather than printed.
    handshake_failures = []

    class Collect(logging.Handler):
        def emit(self, record):
            if record.getMessage() == "opening handshake failed":
                handshake_failures.append(record)

    far_log = logging.getLogger("relay-interop.far-end")
    far_log.propagate = False
    far_log.setLevel(logging.INFO)
    far_log.handlers = [Collect()]

    def check_probes(records):
        for record in records:  # a TLS handshake, then the connection closed before any HTTP request
            error = record.exc_info[1] if record.exc_info else None
            assert isinstance(error, websockets.exceptions.InvalidMessage), error
            assert isinstance(error.__cause__, EOFError), repr(error.__cause__)

    async def far_end(ws):
        async for text in ws:
            got.append(json.loads(text))

    async with websockets.serve(far_end, "127.0.0.1", 0, ssl=context, logger=far_log) as server:
        url = f"wss://127.0.0.1:{server.sockets[0].getsockname()[1]}/gw"
        base = [BINARY, "stream", "--simulate", "--duration", "2", "--emit-interval", "1", "--format", "jsonl",
                "--no-record-db", "--connect", url, "--state-dir", state, "--connect-grace", "2"]
        ok = await asyncio.to_thread(subprocess.run, base + ["--pin", pin], capture_output=True, text=True, timeout=60)
        assert ok.returncode == 0, ok.stderr
        assert [m["type"] for m in got if m.get("delivery") == "reliable"][-1] == "session_summary", got
        links = ok.stderr.count("relay: connected to ")
        assert links >= 1, ok.stderr
        assert len(handshake_failures) == links, ("one certificate probe per link", handshake_failures, ok.stderr)
        check_probes(handshake_failures)
        handshake_failures.clear()
        got.clear()
        wrong = ("00" if not pin.startswith("00") else "11") + pin[2:]
        bad = await asyncio.to_thread(subprocess.run, base + ["--pin", wrong], capture_output=True, text=True,
                                      timeout=60)
        assert bad.returncode == 0, bad.stderr  # the session itself ran; the far end was refused
        assert "not the pinned one" in bad.stderr and "did not receive" in bad.stderr, bad.stderr
        assert not got, got
        # Every refused link ended before the gateway sent an HTTP request (so no token went to the wrong peer).
        assert handshake_failures, "the gateway never reached the far end"
        assert "relay: connected to " not in bad.stderr, bad.stderr
        check_probes(handshake_failures)


async def test_tls_with_a_self_signed_certificate_pinned_by_fingerprint():
    import hashlib
    import ssl
    state = tempfile.mkdtemp(prefix="relay-tls-")
    g = Gateway(["serve", "--simulate", "--listen", "127.0.0.1:0", "--tls"], state)
    try:
        assert g.url.startswith("wss://"), g.url
        created = cli("token", "create", "--name", "phone", state=state).stdout.splitlines()
        token = created[-1]
        pinned = [line.split()[-1] for line in created if "SHA-256" in line]
        assert pinned, created
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # self-signed: trust comes from the pinned fingerprint below
        c = await Consumer.open(g.url, token, ssl=context)
        der = c.ws.transport.get_extra_info("ssl_object").getpeercert(binary_form=True)
        assert ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest()) == pinned[0]
        assert (await c.next())["type"] == "welcome"
        await c.close()
        # attach pins the fingerprint: the right one connects, a wrong one and none are refused with what to do.
        pinned_run = await asyncio.to_thread(
            subprocess.run, [BINARY, "attach", g.url, "--token", token, "--pin", pinned[0], "--start", "focus",
                             "--duration", "2", "--emit-interval", "1"], capture_output=True, text=True, timeout=60)
        assert pinned_run.returncode == 0, pinned_run.stderr
        assert json.loads(pinned_run.stdout.splitlines()[-1])["type"] == "session_summary"
        wrong = "00:" + pinned[0][3:] if not pinned[0].startswith("00:") else "11:" + pinned[0][3:]
        refused = await asyncio.to_thread(
            subprocess.run, [BINARY, "attach", g.url, "--token", token, "--pin", wrong, "--until-summary"],
            capture_output=True, text=True, timeout=60)
        assert refused.returncode == 1 and "not the pinned one" in refused.stderr, refused.stderr
        unpinned = await asyncio.to_thread(
            subprocess.run, [BINARY, "attach", g.url, "--token", token, "--until-summary"],
            capture_output=True, text=True, timeout=60)
        assert unpinned.returncode == 1 and "--pin" in unpinned.stderr, unpinned.stderr
        try:
            await Consumer.open(g.url.replace("wss://", "ws://"), token)
            assert False, "plain ws:// was accepted on the TLS port"
        except (InvalidStatus, ConnectionClosed, OSError, websockets.exceptions.InvalidMessage, EOFError, asyncio.TimeoutError):
            pass
    finally:
        assert g.stop() == 0


# ---------------------------------------------------------------------------------------------------------------

async def main():
    state = tempfile.mkdtemp(prefix="relay-interop-")
    tokens = {}
    for name, extra in (("phone", []), ("dash", ["--read-only"]), ("laptop", []), ("revoked", [])):
        tokens[name] = cli("token", "create", "--name", name, *extra, state=state).stdout.splitlines()[-1]
    listed = cli("token", "list", state=state).stdout
    assert all(n in listed for n in tokens) and not any(tok in listed for tok in tokens.values())
    cli("token", "revoke", "revoked", state=state)
    assert tokens["revoked"] not in open(os.path.join(state, "tokens.json")).read()

    passed = failed = 0

    async def run(name, coro):
        nonlocal passed, failed
        try:
            await coro
            passed += 1
            print(f"PASS {name}")
        except Exception:
            failed += 1
            print(f"FAIL {name}")
            traceback.print_exc()

    g = Gateway(["serve", "--simulate", "--listen", "127.0.0.1:0"], state)
    try:
        for test in (test_auth_failures_are_401, test_read_only_token_is_refused_control,
                     test_phone_starts_and_stops_and_a_second_consumer_sees_it,
                     test_reconnect_redelivers_reliable_and_hello_resumes_samples,
                     test_bad_commands_get_clear_errors_and_the_session_keeps_running):
            await run(test.__name__, test(g, tokens))
        await run("test_revoking_a_token_closes_its_open_connections",
                  test_revoking_a_token_closes_its_open_connections(g, tokens, state))
        await run("test_attach_plays_the_phone", asyncio.to_thread(test_attach_plays_the_phone, g, tokens))
    finally:
        code = g.stop()
    await run("test_serve_exits_cleanly_on_sigterm", asyncio.sleep(0) if code == 0 else _fail(f"exit {code}"))
    await run("test_stream_listen_publishes_its_own_session", test_stream_listen_publishes_its_own_session(state, tokens))
    await run("test_connect_mode_dials_out_and_takes_commands", test_connect_mode_dials_out_and_takes_commands(state))
    await run("test_a_summary_missed_before_a_restart_is_delivered_after_it",
              test_a_summary_missed_before_a_restart_is_delivered_after_it())
    await run("test_stream_connect_reaches_a_late_server_and_resumes_after_a_drop",
              test_stream_connect_reaches_a_late_server_and_resumes_after_a_drop())
    await run("test_stream_connect_pins_a_self_signed_far_end", test_stream_connect_pins_a_self_signed_far_end())
    await run("test_tls_with_a_self_signed_certificate_pinned_by_fingerprint",
              test_tls_with_a_self_signed_certificate_pinned_by_fingerprint())
    print(f"{passed} passed, {failed} failed")
    return failed == 0


async def _fail(message):
    raise AssertionError(message)


if __name__ == "__main__":
    sys.exit(0 if asyncio.run(main()) else 1)
