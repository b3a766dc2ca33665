#include "engine/profiler/op_timer.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

namespace twin {

double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double pos = q * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, values.size() - 1);
  const double t = pos - static_cast<double>(lo);
  return values[lo] + t * (values[hi] - values[lo]);
}

TimingStats time_work(const std::function<void()>& run, std::int32_t per_run, const TimingPolicy& policy) {
  using Clock = std::chrono::steady_clock;
  const double per = static_cast<double>(std::max(per_run, 1));
  for (std::int32_t i = 0; i < policy.warmup; ++i) run();
  std::vector<double> times;
  double spent = 0;
  while (static_cast<std::int32_t>(times.size()) < policy.max_repeats) {
    const auto t0 = Clock::now();
    run();
    const double ns = static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
    times.push_back(std::max(ns, 1.0) / per);
    spent += ns;
    if (static_cast<std::int32_t>(times.size()) >= policy.min_repeats && spent >= policy.budget_ns) break;
  }
  return timing_stats(std::move(times));
}

TimingStats timing_stats(std::vector<double> samples_ns) {
  TimingStats s;
  s.median_ns = quantile(samples_ns, 0.5);
  s.p10_ns = quantile(samples_ns, 0.1);
  s.p90_ns = quantile(samples_ns, 0.9);
  s.repeats = static_cast<std::int32_t>(samples_ns.size());
  s.samples_ns = std::move(samples_ns);
  return s;
}

}  // namespace twin
