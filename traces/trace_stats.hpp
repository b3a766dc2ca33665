#pragma once
// Summary statistics of a trace, computed in one streaming pass.
#include <cstdint>
#include <functional>

#include "engine/core/request.hpp"
#include "traces/trace_reader.hpp"

namespace twin {

struct LengthStats {
  double mean = 0;
  // Nearest-rank percentiles (the smallest value with at least p% of the
  // values at or below it), exact: every length is kept, 4 bytes each.
  std::int32_t p50 = 0, p90 = 0, p99 = 0, max = 0;
};

struct TraceStats {
  std::int64_t num_requests = 0;
  double span_s = 0;           // last arrival - first arrival
  double mean_rate = 0;        // (n - 1) / span: requests per second (0 if span is 0)
  double interarrival_cv = 0;  // std dev / mean of the gaps between arrivals
  LengthStats prompt_tokens;
  LengthStats output_tokens;
  bool has_hash_ids = false;
  // Share of all prompt tokens an infinite prefix cache would serve: a block
  // hits when the same chain of ids (this id under the same parents) was seen
  // before.
  double prefix_cache_share = 0;
  std::int64_t sessions = 0;   // distinct session ids (>= 0)
};

TraceStats compute_stats(TraceReader& reader);
// Same, over any source of requests (generators, transforms).
TraceStats compute_stats(const std::function<bool(Request&)>& next);

}  // namespace twin
