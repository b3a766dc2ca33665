#pragma once
// /metrics: the server's state in Prometheus' text format under vLLM's
// names, so dashboards and autoscalers built for vLLM read twinserve serve.
// The serving loop updates it (gauges after each plan and completion, token
// counters as tokens stream, histograms and request counters as requests
// end); HTTP threads render it. Every metric carries model_name.
#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/core/records.hpp"

namespace twin {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // `name`_bucket{le=...}, `name`_sum and `name`_count lines.
  void render(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  std::vector<std::int64_t> counts_;  // per bound, not cumulative; one more for +Inf
  double sum_ = 0;
  std::int64_t count_ = 0;
};

struct ServeGauges {
  std::int32_t running = 0;
  std::int32_t waiting = 0;
  double kv_usage = 0;              // fraction of KV blocks in use, 0..1
  std::int64_t prefix_queries = 0;  // prompt tokens looked up in the prefix cache
  std::int64_t prefix_hits = 0;     // of those, served from it
};

class ServeMetrics {
 public:
  // max_model_len bounds the token-count histograms' buckets (as vLLM's).
  ServeMetrics(std::string model_name, std::int64_t max_model_len);

  void set_gauges(const ServeGauges& gauges);
  void add_generation_tokens(std::int64_t n);
  // A request ended: its latencies into the histograms (first token, gaps,
  // end to end, queue/prefill/decode/inference time and TPOT for finished
  // ones), its prompt into the prompt counter (requests the core took in),
  // its preemptions into their counter (counted when it ends, not when it
  // was preempted), and the success counter by reason ("stop", "length",
  // or "abort" for aborted ones).
  void on_request_end(const RequestRecord& record, const std::string& finish_reason);

  std::string render() const;

 private:
  std::string labels_;  // model_name="..."
  mutable std::mutex mutex_;
  ServeGauges gauges_;
  std::int64_t prompt_tokens_ = 0;
  std::int64_t generation_tokens_ = 0;
  std::array<std::int64_t, 3> success_{};  // stop, length, abort
  std::int64_t preemptions_ = 0;
  Histogram ttft_;
  Histogram itl_;
  Histogram e2e_;
  // Per request (vLLM's RequestStateStats): queued (arrival to first
  // scheduled), prefill (first scheduled to first token), decode (first
  // token to the end), inference (first scheduled to the end), its TPOT,
  // and its prompt and generated token counts.
  Histogram queue_, prefill_, decode_, inference_, tpot_;
  Histogram prompt_len_, generation_len_;
};

}  // namespace twin
