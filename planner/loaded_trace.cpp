#include "planner/loaded_trace.hpp"

#include <algorithm>
#include <cmath>

#include "engine/core/timeline.hpp"

namespace twin {

LoadedTrace load_trace(const std::string& path, const TraceReadOptions& options) {
  LoadedTrace out;
  out.path = path;
  TraceReader reader(path, options);
  Request r;
  while (reader.next(r)) out.requests.push_back(r);
  return out;
}

namespace {
std::size_t clamp_count(const LoadedTrace& t, std::size_t count) {
  return count == 0 ? t.requests.size() : std::min(count, t.requests.size());
}
}  // namespace

double arrival_rate(const LoadedTrace& trace, std::size_t count) {
  const std::size_t n = clamp_count(trace, count);
  if (n < 2) return 0;
  const Time span = trace.requests[n - 1].arrival - trace.requests[0].arrival;
  if (span <= 0) return 0;
  return static_cast<double>(n - 1) / to_seconds(span);
}

double mean_output_tokens(const LoadedTrace& trace, std::size_t count) {
  const std::size_t n = clamp_count(trace, count);
  if (n == 0) return 0;
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i) sum += trace.requests[i].output_len;
  return sum / static_cast<double>(n);
}

std::int32_t prompt_len_percentile(const LoadedTrace& trace, double p) {
  if (trace.requests.empty()) return 0;
  std::vector<std::int32_t> lens;
  lens.reserve(trace.requests.size());
  for (const auto& r : trace.requests) lens.push_back(r.prompt_len);
  std::sort(lens.begin(), lens.end());
  const double rank = std::ceil(p / 100.0 * static_cast<double>(lens.size()));
  const std::size_t index = static_cast<std::size_t>(std::clamp(rank, 1.0, static_cast<double>(lens.size()))) - 1;
  return lens[index];
}

ScaledTraceSource::ScaledTraceSource(const LoadedTrace& trace, std::size_t count, double speedup)
    : trace_(trace), count_(clamp_count(trace, count)), speedup_(speedup) {}

bool ScaledTraceSource::next(Request& out) {
  if (next_ >= count_) return false;
  out = trace_.requests[next_];
  if (std::isinf(speedup_)) {
    arrive_at_once(out);
  } else {
    replay_faster(out, trace_.requests.front().arrival, speedup_);
  }
  ++next_;
  return true;
}

}  // namespace twin
