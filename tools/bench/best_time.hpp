#pragma once
// The benchmarks' timer: the best of three trials, each long enough to
// average the clock's granularity away. Best, not median: on a shared
// machine the fastest trial is the one least disturbed by neighbours.
#include <algorithm>
#include <chrono>
#include <functional>

namespace twin::bench {

// Seconds per call of `fn` (which ends with a synchronize where the device
// is asynchronous): one warm-up call, then the call count doubles until a
// trial lasts `min_trial_s` (or reaches `max_reps` calls).
inline double best_seconds_per_call(const std::function<void()>& fn, double min_trial_s, int max_reps) {
  using Clock = std::chrono::steady_clock;
  fn();
  int reps = 1;
  for (;;) {
    const auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) fn();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s > min_trial_s || reps > max_reps) break;
    reps *= 2;
  }
  double best = 1e30;
  for (int trial = 0; trial < 3; ++trial) {
    const auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) fn();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count() / reps);
  }
  return best;
}

}  // namespace twin::bench
