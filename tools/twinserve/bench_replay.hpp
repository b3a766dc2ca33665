#pragma once
// `twinserve bench`: a trace replayed against an OpenAI-compatible server
// at the trace's timestamps (or all at once, or with at most N in flight),
// one streaming request per trace request over a bounded pool of
// connections, each a thread. The client's view comes back as request
// records (the schema run and simulate write) and as vLLM's per-request
// lists (vllm_detailed.hpp). docs/bench.md.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/records.hpp"
#include "engine/core/request.hpp"
#include "metrics/vllm_detailed.hpp"
#include "tools/twinserve/bench_client.hpp"

namespace twin::cli {

struct BenchOptions {
  BaseUrl url;
  std::string endpoint = "/v1/completions";  // or /v1/chat/completions
  std::string model;                         // the request's "model"
  std::string prompt_format = "tokens";      // tokens (ids, completions only) or text
  std::int64_t vocab_size = 32000;           // prompt token ids are drawn below it
  std::uint64_t seed = 0;                    // prompt tokens (as run materialises them)
  bool asap = false;                         // every request at t = 0
  std::int32_t max_concurrency = 0;          // > 0: at most this many in flight (vLLM's --max-concurrency)
  std::int32_t connections = 256;            // without max_concurrency: the pool's size
  double timeout_s = 600;                    // per read of a response
  std::function<bool()> stop;                // true: send no more, cancel the streams in flight
  std::function<void(std::int64_t ended)> progress;  // after each request ends (any thread)
};

// One completed request's TTFT at the client and, when the server sent its
// own record (twinserve serve), at the server.
struct TtftPair {
  Time client = 0;
  std::optional<Time> server;
};

struct BenchResult {
  std::vector<RequestRecord> records;        // in trace order
  std::vector<TtftPair> ttfts;               // the completed requests', in trace order
  std::vector<VllmRequestEntry> entries;     // the same requests as vLLM lists them
  std::int64_t late_sends = 0;               // sent over 10 ms after their timestamp
  Time max_send_lag = 0;                     // the latest of them, behind its timestamp
  Time wall = 0;                             // first send to last end
  bool interrupted = false;
};

// Whether the endpoint is OpenAI's chat completions (messages, role deltas).
bool is_chat(const std::string& endpoint);

// The request body: completions {"model", "prompt" (ids or text),
// "max_tokens", "ignore_eos", "stream", "stream_options"} or chat
// {"messages": [{"role": "user", "content": text}], "max_completion_tokens", ...}.
// `request` must carry its prompt tokens (materialised).
std::string completion_body(const Request& request, const BenchOptions& options);

BenchResult run_bench(std::vector<Request> trace, const BenchOptions& options);

}  // namespace twin::cli
