#!/usr/bin/env python3
"""MQTT interop: the built hr-gateway against a real mosquitto with a password file and an ACL, checked by an
independent subscriber (paho-mqtt, not ours).

  mqtt_interop.py PATH/TO/hr-gateway

Checks, each printed as it passes:
  1. a wrong password is refused with a clear error on stderr, and the session's QoS 1 events stay in the outbox;
  2. two gateways at once, the broker killed (SIGKILL) mid-session and restarted: both summaries arrive, each
     started/summary event on hr-gateway/ID/event equal to the gateway's own stdout line, at QoS 1;
  3. the retained status (online, then offline after a clean end) and the Home Assistant discovery configs
     (retained, pointing at the device state topic, availability tied to the status topic);
  4. the ACL: a gateway that claims another ID is not heard under it;
  5. commands over MQTT to `serve`: start_session answered on cmd_result, the same id answered again without a
     second session, stop_session, a malformed command answered with bad_json; a read-only user cannot command;
  6. mqtts:// to a TLS listener whose certificate a private CA signed, trusted with --mqtt-ca (and refused with a
     clear error without it).
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import paho.mqtt.client as mqtt

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from report import Checklist, free_port  # noqa: E402

BINARY = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".build/debug/hr-gateway")
MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
PASSWD = shutil.which("mosquitto_passwd") or "/usr/bin/mosquitto_passwd"
USERS = {"gw-a": "alpha-secret", "gw-b": "beta-secret", "gw-c": "gamma-secret", "watcher": "watch", "ctl": "control"}
ACL = """\
# Every gateway: its own tree, and commands read-only.
pattern readwrite hr-gateway/%u/status
pattern write hr-gateway/%u/event
pattern write hr-gateway/%u/cmd_result
pattern write hr-gateway/%u/device/#
pattern read hr-gateway/%u/cmd
# Home Assistant discovery: a topic level cannot be narrowed to a prefix in mosquitto's ACL.
pattern write homeassistant/sensor/+/config

user watcher
topic read hr-gateway/#
topic read homeassistant/#

user ctl
topic write hr-gateway/+/cmd
topic read hr-gateway/+/cmd_result
topic read hr-gateway/+/event
"""
check = Checklist()


class Broker:
    def __init__(self, folder, port):
        self.folder, self.port, self.proc = folder, port, None
        os.chmod(folder, 0o777)  # mosquitto started as root drops to its own user
        passwd = os.path.join(folder, "passwd")
        for i, (user, password) in enumerate(USERS.items()):
            subprocess.run([PASSWD, "-b"] + (["-c"] if i == 0 else []) + [passwd, user, password], check=True)
        acl = os.path.join(folder, "acl")
        with open(acl, "w") as f:
            f.write(ACL)
        for p in (passwd, acl):
            os.chmod(p, 0o644)
        self.config = os.path.join(folder, "mosquitto.conf")
        with open(self.config, "w") as f:
            f.write(f"listener {port} 127.0.0.1\nallow_anonymous false\npassword_file {passwd}\nacl_file {acl}\n"
                    f"persistence true\npersistence_location {folder}/\nautosave_interval 1\n")

    def start(self):
        self.log = open(os.path.join(self.folder, "broker.log"), "a")
        self.proc = subprocess.Popen([MOSQUITTO, "-c", self.config], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("mosquitto did not start; see " + self.log.name)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait()


class Watcher:
    """A paho-mqtt client that records every message (topic, payload, qos, retain) it receives."""

    def __init__(self, port, user, client_id, topics, clean=True):
        self.messages, self.lock, self.subscribed = [], threading.Lock(), threading.Event()
        self.topics = topics
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=clean)
        self.client.username_pw_set(user, USERS[user])
        self.client.on_connect = self._connected
        self.client.on_subscribe = lambda *a: self.subscribed.set()
        self.client.on_message = self._message
        self.client.reconnect_delay_set(0.2, 1)
        self.client.connect("127.0.0.1", port, keepalive=5)
        self.client.loop_start()
        if not self.subscribed.wait(10):
            raise RuntimeError(f"{user}: not connected and subscribed within 10 s")

    def _connected(self, client, userdata, flags, reason, properties):
        for t in self.topics:
            client.subscribe(t, qos=1)
        if not self.topics:
            self.subscribed.set()

    def _message(self, client, userdata, m):
        with self.lock:
            self.messages.append((m.topic, m.payload.decode("utf-8", "replace"), m.qos, bool(m.retain)))

    def wait_for(self, predicate, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                hit = [m for m in self.messages if predicate(m)]
            if hit:
                return hit
            time.sleep(0.05)
        return []

    def all(self, predicate=lambda m: True):
        with self.lock:
            return [m for m in self.messages if predicate(m)]

    def close(self):
        self.client.loop_stop()
        self.client.disconnect()


def events(messages, gateway, kind):
    out = []
    for topic, payload, qos, retain in messages:
        if topic == f"hr-gateway/{gateway}/event":
            e = json.loads(payload)
            if e.get("type") == kind:
                out.append((e, qos))
    return out


def gateway(args, state):
    extra = ["--no-record-db"] if args[0] == "stream" else []
    return subprocess.Popen([BINARY] + args + ["--state-dir", state] + extra, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def main():
    root = tempfile.mkdtemp(prefix="mqtt-interop-")
    os.chmod(root, 0o755)  # mosquitto started as root reads its files as the mosquitto user
    port = free_port()
    os.makedirs(os.path.join(root, "broker"))
    broker = Broker(os.path.join(root, "broker"), port)
    broker.start()
    url = lambda user, password=None: f"mqtt://{user}:{password or USERS[user]}@127.0.0.1:{port}"
    try:
        # 1. Wrong password.
        state = os.path.join(root, "state-wrong")
        p = gateway(["stream", "--simulate", "--duration", "2", "--mqtt", url("gw-a", "wrong"), "--gateway-id", "gw-a",
                     "--mqtt-grace", "1"], state)
        out, err = p.communicate(timeout=60)
        check(p.returncode == 0, f"wrong password: the session itself still ends normally (exit {p.returncode})")
        check("refused the connection" in err and ("not authorised" in err.lower() or "password" in err.lower()),
              "wrong password: stderr says the broker refused it and why")
        outbox = os.path.join(state, "mqtt-outbox.sqlite")
        import sqlite3
        kept = sqlite3.connect(outbox).execute("SELECT COUNT(*) FROM outbox").fetchone()[0] if os.path.exists(outbox) else 0
        check(kept == 2, f"wrong password: session_started and session_summary kept in the outbox ({kept})")
        first = json.loads(out.splitlines()[0])["session_id"]

        # 2. Two gateways, the broker killed and restarted mid-session.
        watcher = Watcher(port, "watcher", "interop-watcher", ["hr-gateway/#", "homeassistant/#"], clean=False)
        # 1b. The next run with the right password sends what the refused one left, then its own.
        p = gateway(["stream", "--simulate", "--duration", "2", "--mqtt", url("gw-a"), "--gateway-id", "gw-a"], state)
        p.communicate(timeout=60)
        late_events = [json.loads(m[1]) for m in watcher.all(lambda m: m[0] == "hr-gateway/gw-a/event")]
        earlier = [e["type"] for e in late_events if e.get("session_id") == first]
        check(earlier[:2] == ["session_started", "session_summary"] and late_events[0].get("session_id") == first,
              f"outbox: the refused run's events are delivered by the next run, before its own ({earlier})")
        kept = sqlite3.connect(outbox).execute("SELECT COUNT(*) FROM outbox").fetchone()[0]
        check(kept == 0, f"outbox: empty once the broker has acknowledged ({kept})")
        with watcher.lock:
            watcher.messages.clear()

        pwfile = os.path.join(root, "gw-b.password")
        with open(pwfile, "w") as f:
            f.write(USERS["gw-b"] + "\r\n")  # as a Windows editor saves it: the line ending is not the password
        a = gateway(["stream", "--simulate", "--duration", "8", "--mqtt", url("gw-a"), "--gateway-id", "gw-a"],
                    os.path.join(root, "state-a"))
        b = gateway(["stream", "--simulate", "--duration", "8", "--mqtt", f"mqtt://gw-b@127.0.0.1:{port}",
                     "--mqtt-password-file", pwfile, "--gateway-id", "gw-b"], os.path.join(root, "state-b"))
        started = all(watcher.wait_for(lambda m, g=g: m[0] == f"hr-gateway/{g}/event" and "session_started" in m[1], 20)
                      for g in ("gw-a", "gw-b"))
        check(started, "two gateways: both session_started received")
        time.sleep(1.5)  # past the broker's autosave, so the watcher's persistent session survives the kill
        broker.kill()
        time.sleep(7)  # both sessions end while the broker is down
        broker.start()
        outs = {}
        for name, proc in (("gw-a", a), ("gw-b", b)):
            o, e = proc.communicate(timeout=60)
            outs[name] = [json.loads(line) for line in o.splitlines() if line.startswith("{")]
            check(proc.returncode == 0, f"{name}: exit 0 after the broker restart ({proc.returncode}; stderr: {e[-300:]!r})")
        for name in ("gw-a", "gw-b"):
            got = watcher.wait_for(lambda m, g=name: m[0] == f"hr-gateway/{g}/event" and "session_summary" in m[1], 15)
            check(bool(got), f"{name}: session_summary arrived after the broker restart")
            stdout = {e["type"]: e for e in outs[name] if e["type"] in ("session_started", "session_summary")}
            for kind in ("session_started", "session_summary"):
                seen = events(watcher.all(), name, kind)
                check(any(e == stdout.get(kind) for e, _ in seen), f"{name}: {kind} on MQTT equals its stdout line")
                check(seen and all(q == 1 for _, q in seen), f"{name}: {kind} delivered at QoS 1")
            frames = events(watcher.all(), name, "session_frame")
            check(all(q == 0 for _, q in frames), f"{name}: frames at QoS 0 ({len(frames)} seen)")
        watcher.close()

        # 3. Retained status and Home Assistant discovery, as a newcomer sees them.
        late = Watcher(port, "watcher", "interop-late", ["hr-gateway/+/status", "homeassistant/sensor/+/config"])
        time.sleep(1)
        retained = {t: json.loads(p) for t, p, _, r in late.all() if r}
        for name in ("gw-a", "gw-b"):
            st = retained.get(f"hr-gateway/{name}/status", {})
            check(st.get("state") == "offline" and st.get("gateway_id") == name and "version" in st
                  and st.get("sources") == ["simulated"], f"{name}: retained status is offline after a clean end: {st}")
            for metric in ("heart_rate", "rmssd", "contact"):
                topic = f"homeassistant/sensor/{name}_simulated_strap_{metric}/config"
                c = retained.get(topic)
                check(c is not None and c["state_topic"] == f"hr-gateway/{name}/device/simulated_strap/state"
                      and c["availability_topic"] == f"hr-gateway/{name}/status"
                      and c["unique_id"] == f"hr-gateway_{name}_simulated_strap_{metric}"
                      and c["device"]["identifiers"], f"{name}: Home Assistant config {topic}")
        late.close()
        fleet = subprocess.run([BINARY, "fleet", "--mqtt", url("watcher"), "--json", "--wait", "2"],
                               capture_output=True, text=True, timeout=60)
        board = {g["gateway_id"]: g for g in json.loads(fleet.stdout or "{}").get("gateways", [])}
        check(fleet.returncode == 0 and all(board.get(n, {}).get("state") == "offline"
                                            and [d["device"] for d in board[n]["devices"]] == ["simulated_strap"]
                                            and "hr_bpm" in board[n]["devices"][0] for n in ("gw-a", "gw-b")),
              f"fleet --json lists both gateways and their strap from the retained topics: {sorted(board)}")
        state_msgs = [json.loads(p) for t, p, _, _ in watcher.all() if t == "hr-gateway/gw-a/device/simulated_strap/state"]
        check(any("hr_bpm" in s and "rmssd_ms" in s for s in state_msgs), "gw-a: device state carries hr_bpm and rmssd_ms")

        # 3b. Two gateways on one ID (two on one host left on the default): each says so once, and the one still
        # running answers the other's offline with its own online, so the fleet does not see it as gone.
        twin = Watcher(port, "watcher", "interop-twin", ["hr-gateway/gw-a/status"])
        long = gateway(["stream", "--simulate", "--duration", "9", "--mqtt", url("gw-a"), "--gateway-id", "gw-a"],
                       os.path.join(root, "state-twin-1"))
        twin.wait_for(lambda m: '"online"' in m[1], 15)
        short = gateway(["stream", "--simulate", "--duration", "2", "--mqtt", url("gw-a"), "--gateway-id", "gw-a"],
                        os.path.join(root, "state-twin-2"))
        _, short_err = short.communicate(timeout=60)
        time.sleep(1)
        statuses = [json.loads(p) for t, p, _, _ in twin.all()]
        last = statuses[-1] if statuses else {}
        check(long.poll() is None and last.get("state") == "online" and last.get("client_id", "").endswith(f"-{long.pid}"),
              f"two gateways on one ID: after one stops, the status is the running one's online ({last})")
        _, long_err = long.communicate(timeout=60)
        check("another gateway" in short_err and "another gateway" in long_err,
              "two gateways on one ID: each says so on stderr")
        twin.close()

        # 4. The ACL: gw-a claiming to be "intruder" is not heard under that ID.
        spy = Watcher(port, "watcher", "interop-spy", ["hr-gateway/intruder/#"])
        p = gateway(["stream", "--simulate", "--duration", "2", "--mqtt", url("gw-a"), "--gateway-id", "intruder",
                     "--mqtt-grace", "2"], os.path.join(root, "state-intruder"))
        p.communicate(timeout=60)
        time.sleep(0.5)
        check(spy.all() == [], f"ACL: nothing published under another gateway's ID ({len(spy.all())} messages)")
        spy.close()

        # 5. Commands over MQTT to serve.
        ctl = Watcher(port, "ctl", "interop-ctl", ["hr-gateway/gw-c/cmd_result", "hr-gateway/gw-c/event"])
        # A retained command (published long ago, sent again at every connection) is not run: it ran after every
        # restart.
        ctl.client.publish("hr-gateway/gw-c/cmd", json.dumps({"command": "start_session", "id": "r1",
                                                             "session_id": "retained", "mode": "focus",
                                                             "duration_sec": 60}), qos=1, retain=True).wait_for_publish(10)
        serve = gateway(["serve", "--simulate", "--mqtt", url("gw-c"), "--gateway-id", "gw-c"], os.path.join(root, "state-c"))
        online = Watcher(port, "watcher", "interop-online", ["hr-gateway/gw-c/status"])
        check(bool(online.wait_for(lambda m: '"online"' in m[1], 15)), "serve: status online")
        online.close()
        time.sleep(0.5)  # the gateway subscribes to its cmd topic right after connecting
        start = json.dumps({"command": "start_session", "id": "c1", "session_id": "mqtt-cmd", "mode": "focus",
                            "duration_sec": 60})
        ctl.client.publish("hr-gateway/gw-c/cmd", start, qos=1)
        r = ctl.wait_for(lambda m: m[0].endswith("cmd_result") and '"c1"' in m[1], 15)
        check(bool(r) and json.loads(r[0][1]).get("ok") is True and json.loads(r[0][1]).get("session_id") == "mqtt-cmd",
              f"serve: start_session answered on cmd_result: {r[:1]}")
        check(bool(ctl.wait_for(lambda m: m[0].endswith("/event") and "session_started" in m[1], 10)),
              "serve: the session started by MQTT is published")
        ctl.client.publish("hr-gateway/gw-c/cmd", start, qos=1)
        again = ctl.wait_for(lambda m: m[0].endswith("cmd_result") and '"c1"' in m[1], 10)
        time.sleep(0.5)
        again = ctl.all(lambda m: m[0].endswith("cmd_result") and '"c1"' in m[1])
        check(len(again) == 2 and again[0][1] == again[1][1], "serve: a repeated id gets the same result")
        check(len(ctl.all(lambda m: m[0].endswith("/event") and "session_started" in m[1])) == 1,
              "serve: ... and no second session")
        intruder = Watcher(port, "watcher", "interop-readonly", [])
        intruder.client.publish("hr-gateway/gw-c/cmd", json.dumps({"command": "stop_session", "id": "w1",
                                                                   "session_id": "mqtt-cmd"}), qos=1)
        time.sleep(1)
        check(not ctl.all(lambda m: '"w1"' in m[1]), "serve: a user without write access to cmd cannot stop it")
        intruder.close()
        ctl.client.publish("hr-gateway/gw-c/cmd", "{not json", qos=1)
        bad = ctl.wait_for(lambda m: m[0].endswith("cmd_result") and "bad_json" in m[1], 10)
        check(bool(bad), "serve: a malformed command is answered with bad_json")
        ctl.client.publish("hr-gateway/gw-c/cmd", json.dumps({"command": "stop_session", "id": "c2",
                                                             "session_id": "mqtt-cmd"}), qos=1)
        stopped = ctl.wait_for(lambda m: m[0].endswith("cmd_result") and '"c2"' in m[1], 10)
        check(bool(stopped) and json.loads(stopped[0][1]).get("ok") is True, "serve: stop_session answered")
        check(bool(ctl.wait_for(lambda m: m[0].endswith("/event") and "session_summary" in m[1], 10)),
              "serve: the summary is published")
        check(not ctl.all(lambda m: '"r1"' in m[1]) and
              len(ctl.all(lambda m: m[0].endswith("/event") and "session_started" in m[1])) == 1,
              "serve: a retained command is not run")
        serve.send_signal(signal.SIGINT)
        _, serve_err = serve.communicate(timeout=30)
        check("ignored a retained command on hr-gateway/gw-c/cmd" in serve_err,
              f"serve: ... and says how to clear it: {serve_err[-300:]}")
        ctl.client.publish("hr-gateway/gw-c/cmd", b"", qos=1, retain=True).wait_for_publish(10)
        ctl.close()

        # 6. TLS: a private CA, a server certificate for 127.0.0.1, a second mosquitto listening with TLS only.
        tls_dir = os.path.join(root, "tls")
        os.makedirs(tls_dir)
        os.chmod(tls_dir, 0o755)
        ca_key, ca_pem = os.path.join(tls_dir, "ca.key"), os.path.join(tls_dir, "ca.pem")
        key, csr, crt = (os.path.join(tls_dir, n) for n in ("server.key", "server.csr", "server.pem"))
        ext = os.path.join(tls_dir, "ext.cnf")
        with open(ext, "w") as f:
            f.write("subjectAltName=IP:127.0.0.1\n")
        run = lambda *a: subprocess.run(a, check=True, capture_output=True)
        run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca_pem, "-days", "2",
            "-subj", "/CN=hr-gateway interop CA")
        run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1")
        run("openssl", "x509", "-req", "-in", csr, "-CA", ca_pem, "-CAkey", ca_key, "-CAcreateserial", "-out", crt,
            "-days", "2", "-extfile", ext)
        for p_ in (key, crt, ca_pem):
            os.chmod(p_, 0o644)
        tls_port = free_port()
        tls_conf = os.path.join(tls_dir, "mosquitto.conf")
        with open(tls_conf, "w") as f:
            f.write(f"listener {tls_port} 127.0.0.1\nallow_anonymous true\ncertfile {crt}\nkeyfile {key}\n")
        tls_log = open(os.path.join(tls_dir, "broker.log"), "w")
        tls_broker = subprocess.Popen([MOSQUITTO, "-c", tls_conf, "-v"], stdout=tls_log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", tls_port), timeout=0.2).close()
                    break
                except OSError:
                    time.sleep(0.05)
            # Four events in a 2-s session: session_started, the strap streaming, the strap disconnected, the summary.
            sub = subprocess.Popen(["mosquitto_sub", "-h", "127.0.0.1", "-p", str(tls_port), "--cafile", ca_pem,
                                    "-t", "hr-gateway/tls-gw/event", "-C", "4", "-W", "40"],
                                   stdout=subprocess.PIPE, text=True)
            time.sleep(1)
            p = gateway(["stream", "--simulate", "--duration", "2", "--mqtt", f"mqtts://127.0.0.1:{tls_port}",
                         "--mqtt-ca", ca_pem, "--gateway-id", "tls-gw"], os.path.join(root, "state-tls"))
            out, err = p.communicate(timeout=60)
            got, _ = sub.communicate(timeout=60)
            kinds = [json.loads(line).get("type") for line in got.splitlines() if line.startswith("{")]
            check(p.returncode == 0 and kinds[:1] == ["session_started"] and "session_summary" in kinds,
                  f"mqtts with --mqtt-ca: events arrive over TLS ({kinds}; stderr {err[-200:]!r})")
            p = gateway(["stream", "--simulate", "--duration", "2", "--mqtt", f"mqtts://127.0.0.1:{tls_port}",
                         "--gateway-id", "tls-gw", "--mqtt-grace", "2"], os.path.join(root, "state-tls2"))
            out, err = p.communicate(timeout=60)
            check(p.returncode == 0 and "--mqtt-ca" in err and "not acknowledged" in err and "stay in" in err,
                  f"mqtts without the CA: said with what to do, the events stay in the outbox ({err[:300]!r})")
        finally:
            tls_broker.terminate()
            tls_broker.wait()
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    check.finish("MQTT interop")


if __name__ == "__main__":
    main()
