#!/usr/bin/env python3
"""A stand-in OpenAI-compatible server for the `twinserve bench` tests, in
Python's standard library only. It streams server-sent events over HTTP/1.1
chunked responses on a kept-alive connection, one token per chunk, then the
usage chunk and [DONE], and logs every request body it gets.

    fake_openai_server.py PORT_FILE LOG_FILE [METRICS_TTFT_S]

It binds 127.0.0.1 on a free port, writes the port to PORT_FILE (renamed into
place, so a reader never sees half of it) and serves until killed. Special
output lengths: max_tokens 7 is refused with 503 and OpenAI's error shape;
max_tokens 9 streams three tokens per chunk (usage still says 9).
With METRICS_TTFT_S it serves /metrics: vLLM's TTFT histogram, each
streamed request counted at that TTFT (what it claims, not what it took);
without, /metrics is a 404 as on a server that has none.
"""
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG_LOCK = threading.Lock()
METRICS_TTFT_S = None  # the TTFT /metrics claims for every request; None: no /metrics
STREAMED = [0]  # requests streamed, for /metrics
# vLLM's bucket bounds of vllm:time_to_first_token_seconds (a prefix of them).
TTFT_BOUNDS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5]


def metrics_text():
    name = "vllm:time_to_first_token_seconds"
    lines = ["# TYPE %s histogram" % name]
    with LOG_LOCK:
        n = STREAMED[0]
    for le in TTFT_BOUNDS:
        lines.append('%s_bucket{le="%s",model_name="tiny"} %d' % (name, le, n if METRICS_TTFT_S <= le else 0))
    lines.append('%s_bucket{le="+Inf",model_name="tiny"} %d' % (name, n))
    lines.append('%s_count{model_name="tiny"} %d' % (name, n))
    lines.append('%s_sum{model_name="tiny"} %f' % (name, n * METRICS_TTFT_S))
    return "\n".join(lines) + "\n"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet
        pass

    def send_json(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def chunk(self, data):
        payload = ("data: " + data + "\n\n").encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))
        self.wfile.flush()

    def do_GET(self):
        if self.path == "/v1/models":
            self.send_json(200, {"object": "list", "data": [{"id": "tiny", "object": "model"}]})
        elif self.path == "/health":
            self.send_json(200, {})
        elif self.path == "/metrics" and METRICS_TTFT_S is not None:
            body = metrics_text().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_json(404, {"error": {"message": "no route " + self.path, "type": "not_found"}})

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        req = json.loads(self.rfile.read(length))
        with LOG_LOCK, open(LOG_FILE, "a") as log:
            log.write(json.dumps({"path": self.path, "body": req}) + "\n")
        max_tokens = int(req.get("max_tokens", 16))
        if max_tokens == 7:
            self.send_json(503, {"error": {"message": "queue full", "type": "server_busy", "code": 503}})
            return
        prompt = req.get("prompt", "")
        prompt_tokens = len(prompt) if isinstance(prompt, list) else len(str(prompt).split())
        chat = self.path.endswith("chat/completions")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        with LOG_LOCK:  # counted at its first token, as vLLM counts it
            STREAMED[0] += 1
        per_chunk = 3 if max_tokens == 9 else 1
        if chat:  # OpenAI's role delta at once, before any token (not a token)
            start = {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
            self.chunk(json.dumps({"id": "cmpl-1", "object": "chat.completion.chunk", "choices": [start]}))
        sent = 0
        while sent < max_tokens:
            n = min(per_chunk, max_tokens - sent)
            sent += n
            if chat:
                choice = {"index": 0, "delta": {"content": "x" * n}, "finish_reason": None}
            else:
                choice = {"index": 0, "text": "x" * n, "finish_reason": None}
            self.chunk(json.dumps({"id": "cmpl-1", "object": "text_completion", "choices": [choice]}))
        # OpenAI's closing chunk: no text, a finish_reason (not a token).
        end = {"index": 0, "delta": {}, "finish_reason": "length"} if chat else \
            {"index": 0, "text": "", "finish_reason": "length"}
        self.chunk(json.dumps({"id": "cmpl-1", "choices": [end]}))
        # An SSE comment (a keep-alive ping), split over two HTTP chunks.
        for piece in (b": keep-", b"alive\r\n\r\n"):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": max_tokens,
                 "total_tokens": prompt_tokens + max_tokens}
        self.chunk(json.dumps({"id": "cmpl-1", "choices": [], "usage": usage}))
        self.chunk("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


if __name__ == "__main__":
    port_file, LOG_FILE = sys.argv[1], sys.argv[2]
    if len(sys.argv) > 3:
        METRICS_TTFT_S = float(sys.argv[3])
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(port_file + ".tmp", port_file)
    server.serve_forever()
