#pragma once
// Times a piece of engine work: warm-up, then repeats until a time budget or
// a repeat cap is reached; the median and the spread (p10, p90) of the
// repeats. Reads the wall clock (steady_clock): profiler code only.
#include <cstdint>
#include <functional>
#include <vector>

namespace twin {

struct TimingPolicy {
  std::int32_t warmup = 1;
  std::int32_t min_repeats = 3;
  std::int32_t max_repeats = 15;
  double budget_ns = 40e6;  // stop adding repeats once this much was measured
};

struct TimingStats {
  double median_ns = 0;
  double p10_ns = 0;
  double p90_ns = 0;
  std::int32_t repeats = 0;
  std::vector<double> samples_ns;  // every repeat's per-instance time, in order
};

// Median, p10, p90 and count of per-instance times.
TimingStats timing_stats(std::vector<double> samples_ns);

// `run` does the work once and returns after the device finished it (it
// synchronises). Each repeat's time is divided by `per_run` (instances the
// work contains, e.g. the layers a GEMM was cycled over).
TimingStats time_work(const std::function<void()>& run, std::int32_t per_run, const TimingPolicy& policy);

// Nearest-rank style quantile of unsorted values (linear between ranks).
double quantile(std::vector<double> values, double q);

}  // namespace twin
