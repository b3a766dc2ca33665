#!/usr/bin/env python3
"""Figures for `twinserve serve` (docs/serve.md); prints, asserts nothing.

  serve-check.py accuracy BIN [--requests N] [--gap-s S] [-- serve flags]
      Starts `serve --simulate` (default --model llama-3.1-8b --hw h100-80gb),
      sends N streamed completions one at a time (low load), measures each
      one's TTFT and TPOT at the client, then simulates the same requests
      (the arrivals the server recorded) with `twinserve simulate` and prints
      the client's figures against the simulator's prediction.
  serve-check.py load BIN [--clients C] [--duration-s S] [-- serve flags]
      Starts `serve` (default --model tiny --backend cpu), runs C streaming
      clients back to back for S seconds, and prints requests, tokens,
      errors by status, and whether requests.csv has every request the
      clients finished.
Python's standard library only.
"""
import argparse
import csv
import http.client
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def start(binary, out_dir, flags):
    cmd = [binary, "serve", "--port", "0", "--out", out_dir, "--overwrite"] + flags
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = server.stdout.readline()
    if "127.0.0.1:" not in line:
        sys.exit("serve did not start: " + line)
    return server, int(line.split("127.0.0.1:")[1].split()[0])


def stop(server):
    server.send_signal(signal.SIGTERM)
    server.communicate(timeout=300)


def stream(port, body):
    """Returns (status, t_send, token event times, usage tokens)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        resp.read()
        conn.close()
        return resp.status, t0, [], 0
    times, usage = [], 0
    while True:
        line = resp.readline()
        if not line:
            break
        line = line.decode().strip()
        if not line.startswith("data: "):
            continue
        data = line[6:]
        if data == "[DONE]":
            break
        ev = json.loads(data)
        if ev.get("usage"):
            usage = ev["usage"]["completion_tokens"]
        elif ev["choices"] and ev["choices"][0]["finish_reason"] is None:
            times.append(time.perf_counter())
    conn.close()
    return 200, t0, times, usage


def text(rng, n):
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(n))


def accuracy(args, flags):
    flags = flags or ["--simulate", "--model", "llama-3.1-8b", "--hw", "h100-80gb"]
    rng = random.Random(1)
    tmp = tempfile.mkdtemp(prefix="serve-check-")
    server, port = start(args.bin, os.path.join(tmp, "serve"), flags)
    client = []
    for _ in range(args.requests):
        prompt, out = rng.randint(100, 2000), rng.randint(16, 256)
        status, t0, times, _ = stream(port, {"prompt": text(rng, prompt), "max_tokens": out, "stream": True,
                                             "ignore_eos": True, "stream_options": {"include_usage": True}})
        client.append((t0, times))
        time.sleep(args.gap_s)
    stop(server)
    with open(os.path.join(tmp, "serve", "requests.csv")) as f:
        rows = sorted(csv.DictReader(f), key=lambda r: int(r["id"]))
    trace = os.path.join(tmp, "trace.jsonl")
    with open(trace, "w") as f:
        for r in rows:
            f.write(json.dumps({"id": int(r["id"]), "arrival_s": float(r["arrival_s"]),
                                "prompt_len": int(r["prompt_tokens"]), "output_len": int(r["output_tokens"])}) + "\n")
    sim_flags = [x for x in flags if x != "--simulate"]
    sim_flags = ["--hw" if x == "--hw" else x for x in sim_flags]
    subprocess.run([args.bin, "simulate", "--trace", trace, "--out", os.path.join(tmp, "sim"), "--overwrite"]
                   + sim_flags, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(tmp, "sim", "requests.csv")) as f:
        sim = {int(r["id"]): r for r in csv.DictReader(f)}
    d_ttft, d_tpot, d_srv = [], [], []
    print("%4s %6s %5s %10s %10s %10s %10s" % ("id", "prompt", "out", "ttft_cli", "ttft_sim", "tpot_cli", "tpot_sim"))
    for r, (t0, times) in zip(rows, client):
        s = sim[int(r["id"])]
        ttft_c = (times[0] - t0) * 1e3
        tpot_c = (times[-1] - times[0]) * 1e3 / (len(times) - 1)
        ttft_s, tpot_s = float(s["ttft_ms"]), float(s["tpot_ms"])
        d_ttft.append(ttft_c - ttft_s)
        d_tpot.append(tpot_c - tpot_s)
        d_srv.append(float(r["ttft_ms"]) - ttft_s)
        print("%4s %6s %5s %10.3f %10.3f %10.4f %10.4f" % (r["id"], r["prompt_tokens"], r["output_tokens"],
                                                           ttft_c, ttft_s, tpot_c, tpot_s))
    ab = lambda xs: (statistics.mean(xs), max(abs(x) for x in xs))
    print("client - simulator, ms: TTFT mean %+.3f max |%.3f|; TPOT mean %+.4f max |%.4f|" % (ab(d_ttft) + ab(d_tpot)))
    print("server's own requests.csv - simulator, TTFT ms: mean %+.4f max |%.4f|" % ab(d_srv))


def load(args, flags):
    flags = flags or ["--model", "tiny", "--backend", "cpu"]
    tmp = tempfile.mkdtemp(prefix="serve-load-")
    server, port = start(args.bin, os.path.join(tmp, "serve"), flags)
    stats = {"ok": 0, "tokens": 0, "short": 0, "errors": {}, "ids": 0}
    lock = threading.Lock()
    deadline = time.time() + args.duration_s

    def client(i):
        rng = random.Random(i)
        while time.time() < deadline:
            want = rng.randint(16, 64)
            try:
                status, _, times, usage = stream(port, {"prompt": text(rng, rng.randint(32, 256)), "max_tokens": want,
                                                        "stream": True, "stream_options": {"include_usage": True}})
            except Exception as e:  # a dropped connection counts as an error
                status, times, usage = type(e).__name__, [], 0
            with lock:
                if status == 200:
                    stats["ok"] += 1
                    stats["tokens"] += len(times)
                    if len(times) != want or usage != want:
                        stats["short"] += 1
                else:
                    stats["errors"][status] = stats["errors"].get(status, 0) + 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - t0
    stop(server)
    with open(os.path.join(tmp, "serve", "requests.csv")) as f:
        rows = list(csv.DictReader(f))
    finished = sum(1 for r in rows if r["outcome"] == "finished")
    rejected = sum(1 for r in rows if r["outcome"] == "rejected")
    print("%d clients for %.1f s: %d requests ok (%d tokens, %.1f tok/s), %d short, errors %s" %
          (args.clients, wall, stats["ok"], stats["tokens"], stats["tokens"] / wall, stats["short"], stats["errors"]))
    print("requests.csv: %d rows, %d finished, %d rejected (the clients saw %d ok)" %
          (len(rows), finished, rejected, stats["ok"]))


def main():
    argv = sys.argv[1:]
    flags = []
    if "--" in argv:
        i = argv.index("--")
        argv, flags = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["accuracy", "load"])
    p.add_argument("bin")
    p.add_argument("--requests", type=int, default=20)
    p.add_argument("--gap-s", type=float, default=0.2)
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--duration-s", type=float, default=60)
    args = p.parse_args(argv)
    (accuracy if args.mode == "accuracy" else load)(args, flags)


if __name__ == "__main__":
    main()
