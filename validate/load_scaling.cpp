#include "validate/load_scaling.hpp"

#include <cmath>

#include "engine/core/error.hpp"

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
    // Rounded to whole ns: the file written and the engine's clock agree.
    const double at = rate > 0 ? static_cast<double>(out[i].arrival - first) * rate / rate_rps
                               : static_cast<double>(i) * 1e9 / rate_rps;
    out[i].arrival = static_cast<Time>(std::llround(at));
    if (out[i].cancel_time != kNoTime) {
      // The client's patience scales with the clock, as its arrival does.
      const double wait = static_cast<double>(trace[i].cancel_time - trace[i].arrival);
      out[i].cancel_time = out[i].arrival + static_cast<Time>(std::llround(rate > 0 ? wait * rate / rate_rps : wait));
    }
  }
  return out;
}

std::vector<Request> all_at_once(const std::vector<Request>& trace) {
  std::vector<Request> out = trace;
  for (Request& r : out) {
    if (r.cancel_time != kNoTime) r.cancel_time -= r.arrival;
    r.arrival = 0;
  }
  return out;
}

}  // namespace twin
