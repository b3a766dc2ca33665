#pragma once
// Replaying a client's timeline faster or all at once: the one rule for a
// request's arrival and its cancel time (the client's patience) whenever a
// trace is replayed at another rate (`run --time-scale`, validate's loads)
// or as a burst (`run --asap`, capacity runs). The patience scales with the
// clock, as the arrival does: a client who gave up 5 ms after sending at 2 s
// gives up 5 us after sending when the trace is replayed 1000x faster.
#include "engine/core/request.hpp"

namespace twin {

// Arrival and cancel time measured from `origin` and divided by `speedup`
// (> 0), rounded to whole nanoseconds; the cancel time keeps its distance
// from the arrival, divided likewise.
void replay_faster(Request& r, Time origin, double speedup);

// Every request at t = 0, its patience unchanged.
void arrive_at_once(Request& r);

}  // namespace twin
