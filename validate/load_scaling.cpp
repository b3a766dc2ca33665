#include "validate/load_scaling.hpp"

#include <cmath>

#include "base/error.hpp"
#include "engine/core/timeline.hpp"

namespace twin {

double trace_rate(const std::vector<Request>& trace) {
  if (trace.size() < 2) return 0;
  const Time span = trace.back().arrival - trace.front().arrival;
  if (span <= 0) return 0;
  return static_cast<double>(trace.size() - 1) / to_seconds(span);
}

std::vector<Request> scale_to_rate(const std::vector<Request>& trace, double rate_rps) {
  if (!(rate_rps > 0) || !std::isfinite(rate_rps)) {
    throw Error("cannot scale a trace to " + std::to_string(rate_rps) + " requests/s; a rate must be positive");
  }
  std::vector<Request> out = trace;
  const double rate = trace_rate(trace);
  const Time first = trace.empty() ? 0 : trace.front().arrival;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (rate > 0) {
      replay_faster(out[i], first, rate_rps / rate);
    } else {  // all at one instant: spread evenly at the rate, patience kept
      arrive_at_once(out[i]);
      replay_faster(out[i], -static_cast<Time>(std::llround(static_cast<double>(i) * 1e9 / rate_rps)), 1.0);
    }
  }
  return out;
}

std::vector<Request> all_at_once(const std::vector<Request>& trace) {
  std::vector<Request> out = trace;
  for (Request& r : out) arrive_at_once(r);
  return out;
}

}  // namespace twin
