#!/usr/bin/env python3
"""A stream whose client goes while its request is still queued is cancelled
before it starts (issue 43: it used to be scheduled and generate tokens
until a write failed).

Usage: serve_queued_cancel_test.py TWINSERVE OUT_DIR [serve flags...]

One sequence at a time (--max-num-seqs 1): request A streams and holds the
engine; request B is streamed behind it, its 200 read (taken in, queued),
then its client closes. The test waits (a deadline only guards a broken
build) until /metrics shows no request waiting, i.e. the server found B
gone, then closes A, SIGTERMs the server and reads requests.csv: B aborted
as cancelled with no token and never scheduled. Without the fix B waits for
A to end, is scheduled and generates tokens. No timing is asserted.
"""
import csv
import http.client
import json
import os
import sys
import time

from serve_http_test import check, finish, serve  # beside this file


def open_stream(port, body):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    check(resp.status == 200, "stream answered 200 (%d)" % resp.status)
    return conn, resp


def first_event(resp):
    while True:
        line = resp.readline()
        if not line:
            return None
        line = line.decode("utf-8").strip()
        if line.startswith("data: "):
            return json.loads(line[len("data: "):])


def gauge(port, name):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode("utf-8")
    conn.close()
    for line in text.splitlines():
        if line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def wait_gauge(port, name, value):
    deadline = time.monotonic() + 60  # only a guard against a broken build
    while time.monotonic() < deadline:
        if gauge(port, name) == value:
            return True
        time.sleep(0.05)
    return False


def run_client(port):
    # A holds the one sequence slot: its first token is out.
    conn_a, resp_a = open_stream(port, {"prompt": "hold the engine", "max_tokens": 4000, "stream": True})
    check(first_event(resp_a) is not None, "A streams")
    # B is taken in and queued behind A; its client then goes.
    conn_b, _ = open_stream(port, {"prompt": "queued then gone", "max_tokens": 64, "stream": True})
    check(wait_gauge(port, "vllm:num_requests_waiting", 1), "B waits behind A")
    conn_b.sock.close()
    conn_b.close()
    check(wait_gauge(port, "vllm:num_requests_waiting", 0), "B's cancel lands")
    check(gauge(port, "vllm:num_requests_running") == 1, "A still runs when B's cancel has landed")
    conn_a.sock.close()
    conn_a.close()


def main():
    binary, out_dir = sys.argv[1], sys.argv[2]
    serve(binary, out_dir, ["--max-num-seqs", "1"] + sys.argv[3:], run_client)
    with open(os.path.join(out_dir, "requests.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    check(len(rows) == 2, "two requests recorded (%d)" % len(rows))
    if len(rows) == 2:
        a, b = sorted(rows, key=lambda r: int(r["id"]))
        check(b["outcome"] == "aborted" and b["reason"] == "cancelled",
              "B aborted as cancelled (%s, %s)" % (b["outcome"], b["reason"]))
        check(int(b["output_tokens"]) == 0, "B generated no token (%s)" % b["output_tokens"])
        check(b["scheduled_s"] == "", "B was never scheduled (%s)" % b["scheduled_s"])
        check(a["outcome"] == "aborted", "A was cancelled by its client (%s)" % a["outcome"])
    finish()


if __name__ == "__main__":
    main()
