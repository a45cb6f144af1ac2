#!/usr/bin/env python3
"""Prometheus metrics of the built hr-gateway, parsed by prometheus_client's own parser (not ours).

  metrics_check.py PATH/TO/hr-gateway

A simulated session with the relay (--listen, a token) and --metrics-listen: both /metrics pages parse; the families
a fleet dashboard needs are there with their types and labels; counters move forward between scrapes; the relay's
page refuses a request without the token.
"""
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from report import Checklist, free_port  # noqa: E402

BINARY = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".build/debug/hr-gateway")
check = Checklist()


def scrape(url, token=None):
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    with urllib.request.urlopen(request, timeout=5) as r:
        content_type = r.headers.get("Content-Type", "")
        text = r.read().decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    return families, content_type


def value(families, name, **labels):
    f = families.get(name)
    for s in (f.samples if f else []):
        if all(s.labels.get(k) == v for k, v in labels.items()) and s.name in (name, name + "_total"):
            return s.value
    return None


def main():
    state = tempfile.mkdtemp(prefix="metrics-check-")
    token = subprocess.run([BINARY, "token", "create", "--name", "prometheus", "--read-only", "--state-dir", state],
                           check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    relay_port, metrics_port = free_port(), free_port()
    gateway = subprocess.Popen(
        [BINARY, "stream", "--simulate", "--duration", "30", "--no-record-db", "--state-dir", state,
         "--listen", f"127.0.0.1:{relay_port}", "--metrics-listen", f"127.0.0.1:{metrics_port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        page = f"http://127.0.0.1:{metrics_port}/metrics"
        deadline = time.monotonic() + 20
        first = None
        while time.monotonic() < deadline:
            try:
                first, content_type = scrape(page)
                if value(first, "hr_gateway_notifications", device="simulated-strap", source="simulated"):
                    break
            except (urllib.error.URLError, ConnectionError):
                pass
            time.sleep(0.2)
        check(first is not None, "--metrics-listen: /metrics answers and parses")
        check(content_type.startswith("text/plain") and "version=0.0.4" in content_type,
              f"content type is the text exposition format ({content_type})")
        expected = {
            "hr_gateway_notifications": "counter", "hr_gateway_rr_intervals": "counter",
            "hr_gateway_heart_rate_bpm": "gauge", "hr_gateway_contact": "gauge", "hr_gateway_session_active": "gauge",
            "hr_gateway_events": "counter", "hr_gateway_sensor_streaming": "gauge",
            "hr_gateway_nonfinite_values_dropped": "counter", "hr_gateway_outbox_depth": "gauge",
            "hr_gateway_relay_consumers": "gauge",
        }
        for name, kind in expected.items():
            f = first.get(name)
            check(f is not None and f.type == kind, f"family {name} is a {kind}" + ("" if f else " (missing)"))
        check(value(first, "hr_gateway_session_active") == 1, "a session is active")
        check(value(first, "hr_gateway_outbox_depth", outbox="relay") is not None, "the relay outbox depth is reported")
        check(value(first, "hr_gateway_relay_consumers") == 0, "no relay consumer is connected yet")
        hr = value(first, "hr_gateway_heart_rate_bpm", device="simulated-strap")
        check(hr is not None and 30 < hr < 220, f"heart rate of the strap is plausible ({hr})")
        n1 = value(first, "hr_gateway_notifications", device="simulated-strap", source="simulated")
        time.sleep(2.5)
        second, _ = scrape(page)
        n2 = value(second, "hr_gateway_notifications", device="simulated-strap", source="simulated")
        check(n1 is not None and n2 is not None and n2 > n1, f"notifications counter moves forward ({n1} -> {n2})")

        relay_page = f"http://127.0.0.1:{relay_port}/metrics"
        try:
            urllib.request.urlopen(relay_page, timeout=5)
            check(False, "the relay's /metrics refuses a request without a token")
        except urllib.error.HTTPError as e:
            check(e.code == 401, f"the relay's /metrics refuses a request without a token ({e.code})")
        relay, _ = scrape(relay_page, token)
        check(value(relay, "hr_gateway_notifications", device="simulated-strap", source="simulated") is not None,
              "the relay's /metrics with a read-only token parses and has the same families")
    finally:
        gateway.terminate()
        gateway.wait(timeout=30)
    check.finish("metrics")


if __name__ == "__main__":
    main()
