#pragma once
// How many requests a trace holds, counted on a thread of its own while the
// run reads the trace itself: a progress line's total for commands that
// stream a trace (simulate), without making the run wait for a first pass.
// Until the count is known (or if it fails: the run reports the trace's
// errors itself) the total is 0, which a progress line shows as unknown.
#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "traces/trace_reader.hpp"

namespace twin::cli {

class TraceCount {
 public:
  // Counts only if `wanted` (a progress line is shown) and `path` is a
  // regular file; at most `max_requests` when above 0.
  TraceCount(const std::string& path, const TraceReadOptions& options, std::int64_t max_requests, bool wanted);
  ~TraceCount();  // stops the count and joins its thread
  TraceCount(const TraceCount&) = delete;
  TraceCount& operator=(const TraceCount&) = delete;

  std::int64_t total() const { return total_.load(std::memory_order_relaxed); }
  void wait();  // until the count is done (tests; the run never waits)

 private:
  std::atomic<std::int64_t> total_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace twin::cli
