// Fuzz targets over what `twinserve serve` and the long commands read from
// a client or a user directly: raw HTTP requests through the server's own
// connection handling, routes and request parser; and --config YAML files.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "serve/byte_tokenizer.hpp"
#include "serve/http_front.hpp"
#include "serve/request_inbox.hpp"
#include "serve/serve_metrics.hpp"
#include "tools/fuzz/fuzz_target.hpp"
#include "tools/twinserve/config_file.hpp"

namespace twin::fuzz {
namespace {

// --- HTTP requests (serve) ---

std::string post(const std::string& path, const std::string& body, const std::string& extra = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n" + extra +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::vector<std::string> http_seeds() {
  const std::string chat =
      R"({"model": "tiny", "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": [{"type": "text", "text": "hi"}]}], "max_completion_tokens": 8, "stream": true, "stream_options": {"include_usage": true}})";
  const std::string completion =
      R"({"model": "tiny", "prompt": "Hello", "max_tokens": 16, "temperature": 0.5, "top_p": 0.9, "top_k": 20, "seed": 7, "stop": ["\n", "END"], "ignore_eos": false, "n": 1})";
  return {
      post("/v1/completions", completion),
      post("/v1/completions", R"({"prompt": [[1, 2, 3, 255]], "max_tokens": 4, "logprobs": false})"),
      post("/v1/chat/completions", chat),
      post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "text"}})"),
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{\"prompt\": \"ab\"}\r\n0\r\n\r\n",
      "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n",
      post("/v1/completions", R"({"prompt": "a"})", "Connection: keep-alive\r\n") + post("/v1/other", "{}"),
      "GET /v1/models?x=1 HTTP/1.0\r\nRange: bytes=0-10\r\nExpect: 100-continue\r\n\r\n",
  };
}

// One server for the whole run: its inbox is closed, so a request that
// parses is answered 503 (shutting down) at once, with no serving loop.
HttpFront& fuzz_front() {
  static RequestInbox inbox(std::chrono::steady_clock::now());
  static ServeMetrics metrics("tiny", 256);
  static const ByteTokenizer tokenizer(256);
  static HttpFront front = [] {
    inbox.close();
    HttpFrontOptions o;
    o.threads = 1;
    o.limits = ApiLimits{"tiny", 256, 256};
    o.max_request_bytes = 32768;  // inputs reach 64 KiB: the 413 paths run too
    o.connection.max_head_bytes = 4096;
    return HttpFront(inbox, metrics, tokenizer, o);
  }();
  return front;
}

// Every response: no 500 (a fault), and no error body past 1000 bytes (an
// error quoting the input whole).
void run_http(const std::string& input, const Scratch&) {
  const std::string out = fuzz_front().serve_bytes(input);
  for (std::size_t at = out.find("HTTP/1.1 "); at != std::string::npos; at = out.find("HTTP/1.1 ", at + 1)) {
    if (out.compare(at + 9, 3, "500") == 0) throw std::logic_error("HTTP 500: " + excerpt(out.substr(at), 600));
  }
  for (std::size_t at = out.find("{\"error\""); at != std::string::npos; at = out.find("{\"error\"", at + 1)) {
    const std::size_t end = out.find("HTTP/1.1 ", at);
    const std::size_t size = (end == std::string::npos ? out.size() : end) - at;
    if (size > 1000) throw std::logic_error("an error body of " + std::to_string(size) + " bytes");
  }
}

bool names_http(const std::string&, const Scratch&) { return true; }  // nothing is refused with an Error

// --- --config YAML files ---

std::vector<std::string> yaml_seeds() {
  return {"model: tiny\nhw: h100-80gb\nmax-num-seqs: 64\nslo: [ttft_p90<=1s, tpot_p99<=100ms]\nno-steps: true\n",
          "speculative-config: {method: ngram, num_speculative_tokens: 3, prompt_lookup_max: 4}\nseed: 7\n",
          "speculative-config: &b {method: ngram, num_speculative_tokens: 2}\nslo: [&t ttft_p90<=1s, *t]\n",
          "# comments only\n",
          "max_num_seqs: 8\nslo:\n  - ttft_p90<=2s\n  - e2el<=10s\nmodel: \"tiny\"\n"};
}

void run_yaml(const std::string& input, const Scratch& scratch) {
  const std::string path = scratch.write("input.yaml", input);
  const std::vector<cli::YamlFlag> flags = cli::read_yaml_flags(path);
  CLI::App app("fuzz", "simulate");
  std::string model, hw, spec;
  std::int32_t max_num_seqs = 0;
  std::uint64_t seed = 0;
  std::vector<std::string> slo;
  bool no_steps = false;
  app.add_option("--model", model);
  app.add_option("--hw", hw);
  app.add_option("--max-num-seqs", max_num_seqs)->check(CLI::Range(1, 1 << 20));
  app.add_option("--seed", seed);
  app.add_option("--slo", slo);
  app.add_option("--speculative-config", spec);
  app.add_flag("--no-steps", no_steps);
  cli::apply_yaml_flags(app, path, flags);
}

}  // namespace

std::vector<FuzzTarget> serve_targets() {
  return {
      FuzzTarget{"http-request", "raw HTTP requests through serve's connection handling, routes and request parser (no 500)",
                 1 << 16, http_seeds, run_http, names_http},
      file_target("config-yaml", "--config YAML files (read_yaml_flags, apply_yaml_flags)", yaml_seeds, run_yaml,
                  "input.yaml"),
  };
}

}  // namespace twin::fuzz
