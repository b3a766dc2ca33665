#pragma once
// Replaying a client's timeline faster or all at once: the one rule for a
// request's arrival and its cancel time (the client's patience) whenever a
// trace is replayed at another rate (`run --time-scale`, `trace convert
// --scale-rate`, validate's loads, the planner's probes and sweep's
// rate_scale) or as a burst (`run --asap`, capacity runs). The patience
// scales with the clock, as the arrival does: a client who gave up 5 ms after
// sending at 2 s gives up 5 us after sending when the trace is replayed 1000x
// faster.
#include "engine/core/record_stream.hpp"
#include "engine/core/request.hpp"

namespace twin {

// Arrival and cancel time measured from `origin` and divided by `speedup`
// (> 0; 2 doubles the rate), rounded to whole nanoseconds; the cancel time
// keeps its distance from the arrival, divided likewise. Patience is never
// negative: a cancel time before the arrival (a trace reader's clamp of a
// row slightly out of order can make one) moves to the arrival. Throws
// twin::Error naming the request when a time leaves the clock's range.
void replay_faster(Request& r, Time origin, double speedup);

// Every request at t = 0, its patience unchanged (never negative).
void arrive_at_once(Request& r);

// Another source's requests on a replayed timeline: `speedup` times faster
// from t = 0, or every one at t = 0.
class ReplayedSource final : public RequestSource {
 public:
  enum class Mode { faster, at_once };
  ReplayedSource(RequestSource& source, Mode mode, double speedup = 1.0);
  bool next(Request& out) override;

 private:
  RequestSource& source_;
  Mode mode_;
  double speedup_;
};

}  // namespace twin
