#!/usr/bin/env python3
"""A webhook receiver that fails on purpose, for the WebhookSink and CLI tests.

    python3 Tests/Fixtures/flaky_webhook.py --fail 2 --mode status --accepted /tmp/accepted.jsonl

Binds 127.0.0.1 on a free port and prints the port on the first line of standard output. The first --fail POST
requests are refused: answered with HTTP 500 (--mode status) or the connection closed without an answer
(--mode drop). Later ones are answered 204 after their body has been appended, as one line of JSON
{"path": ..., "content_type": ..., "body": <the body text>}, to the --accepted file (written and flushed before the
answer is sent, so a client that saw the 2xx can read it). Every request (accepted or not) is also appended to
--accepted + ".all" as {"path": ..., "status": ...}. With --fail-while FILE, requests are also refused while FILE
exists. Runs until killed.
"""
import argparse
import http.server
import json
import os
import sys
import threading

parser = argparse.ArgumentParser()
parser.add_argument("--fail", type=int, default=0)
parser.add_argument("--mode", choices=["status", "drop"], default="status")
parser.add_argument("--accepted", required=True)
parser.add_argument("--fail-while", help="also refuse every request while this file exists")
args = parser.parse_args()

lock = threading.Lock()
state = {"seen": 0}


def log(path, record):
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length).decode("utf-8")
        with lock:
            state["seen"] += 1
            failing = state["seen"] <= args.fail or bool(args.fail_while and os.path.exists(args.fail_while))
            if failing:
                log(args.accepted + ".all", {"path": self.path, "status": 500 if args.mode == "status" else 0})
            else:
                log(args.accepted, {"path": self.path, "content_type": self.headers.get("Content-Type"),
                                    "idempotency_key": self.headers.get("Idempotency-Key"), "body": body})
                log(args.accepted + ".all", {"path": self.path, "status": 204})
        if failing and args.mode == "drop":
            self.close_connection = True
            self.connection.shutdown(2)
            return
        self.send_response(500 if failing else 204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
