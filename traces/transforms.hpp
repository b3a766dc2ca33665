#pragma once
// Streaming transforms applied while copying a trace: slice by time window
// and count, scale the arrival rate, clip lengths. Order: the time window and
// count select requests on the original clock; then arrivals are shifted so
// the window starts at 0 and divided by the rate factor, cancel times with
// them (engine/core/timeline.hpp: the client's patience scales too); then
// lengths are clipped (hash ids and prompt tokens are cut to match).
#include <cstdint>
#include <functional>

#include "engine/core/request.hpp"

namespace twin {

struct TransformOptions {
  double rate_scale = 1.0;         // k > 0: arrivals divided by k (k = 2 doubles the rate)
  double start_s = 0;              // keep arrivals >= start_s ...
  double end_s = -1;               // ... and < end_s (negative: no end)
  std::int64_t max_requests = -1;  // keep at most this many (negative: all)
  std::int32_t max_prompt = 0;     // clip prompt lengths (0: no clip)
  std::int32_t max_output = 0;     // clip output lengths (0: no clip)
};

// Validates the options (UsageError naming the bad one).
void check_transform_options(const TransformOptions& options);

class TraceTransform {
 public:
  TraceTransform(std::function<bool(Request&)> source, const TransformOptions& options);
  // Next kept request, transformed; false when the source ends or a limit is hit.
  bool next(Request& out);
  std::int64_t dropped() const { return dropped_; }

 private:
  std::function<bool(Request&)> source_;
  TransformOptions options_;
  Time start_ns_ = 0, end_ns_ = -1;
  std::int64_t kept_ = 0, dropped_ = 0;
};

}  // namespace twin
