#pragma once
// vllm_result.json: a run's summary under the keys `vllm bench serve
// --save-result` writes (vllm/benchmarks/serve.py), so scripts written for
// vLLM's results read ours unchanged. The per-request lists of
// --save-detailed (input_lens, ttfts, itls, ...) are not written: they are
// in requests.csv.
#include <iosfwd>
#include <string>

#include <nlohmann/json.hpp>

#include "metrics/summary.hpp"

namespace twin {

struct VllmResultContext {
  std::string label;     // vLLM's --label: which side ran, e.g. "twinserve-simulate"
  std::string model_id;  // the model's name (also its tokenizer's: no tokenizer is loaded)
  std::string date;      // vLLM's "%Y%m%d-%H%M%S" (vllm_result_date()); empty: vllm_result_date() now
};

// The date vLLM stamps a result with, "%Y%m%d-%H%M%S" in local time; with
// SOURCE_DATE_EPOCH set (reproducible builds' convention), that instant in
// UTC, so a run can be made to write the same bytes twice.
std::string vllm_result_date();

// Keys: date, backend and endpoint_type ("twinserve"), label, model_id, tokenizer_id, num_prompts,
// request_rate (offered, req/s; null for a burst), burstiness and
// max_concurrency (null: arrivals come from the trace, concurrency is not
// capped), duration, completed, failed (rejected + aborted),
// total_input_tokens, total_output_tokens, request_throughput,
// request_goodput (null without SLOs), output_throughput,
// total_token_throughput, max_output_tokens_per_s, max_concurrent_requests
// (metrics/peak_tally.hpp), then for ttft, tpot, itl and e2el: mean_, median_,
// std_, p90_, p99_ *_ms.
nlohmann::ordered_json vllm_result_json(const Summary& summary, const VllmResultContext& context);
void write_vllm_result(std::ostream& out, const Summary& summary, const VllmResultContext& context);

}  // namespace twin
