#pragma once
// Is the cluster falling behind its arrivals? When the offered load exceeds
// what the replicas serve, the queue grows for as long as requests keep
// coming, and every latency figure measures the queue rather than the
// service. The sign: requests arriving late in the trace wait far longer
// for their first token than those arriving early. A burst (every arrival
// at once, `run --asap`) has no such trend and is never flagged.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/types.hpp"

namespace twin {

struct BacklogTrend {
  std::uint64_t early = 0, late = 0;  // completed requests arriving in the first / last quarter of the arrival span
  double early_ttft_p50_ms = 0, late_ttft_p50_ms = 0;
  double offered_rate = 0;  // requests / arrival span, req/s (0: a burst)
  bool falling_behind = false;
};

// `arrival_ttft`: (arrival, TTFT) of each completed request, in any order;
// `num_requests` every request's count (for the offered rate) and
// [first_arrival, last_arrival] their arrival span.
BacklogTrend backlog_trend(std::vector<std::pair<Time, Time>> arrival_ttft, std::uint64_t num_requests,
                           Time first_arrival, Time last_arrival);

// A one-line warning when the trend says the cluster falls behind, naming
// the offered and the served rate (req/s); nothing otherwise.
std::optional<std::string> backlog_warning(const BacklogTrend& trend, double served_rate);

}  // namespace twin
