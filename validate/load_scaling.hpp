#pragma once
// Turning a trace into an offered load: the trace's arrival process is kept
// (its gaps, bursts and order) and stretched or squeezed to a target rate.
#include <vector>

#include "engine/core/request.hpp"

namespace twin {

// Requests per second over the trace's span, (n - 1) / (last - first
// arrival); 0 when every request arrives at once (or n < 2).
double trace_rate(const std::vector<Request>& trace);

// The trace with arrivals shifted to start at 0 and scaled so that its rate
// is `rate_rps` (> 0). A trace whose requests all arrive at once gets evenly
// spaced arrivals at that rate instead. Arrival order is kept.
std::vector<Request> scale_to_rate(const std::vector<Request>& trace, double rate_rps);

// Every request at t = 0 (a saturated run: what the replica can serve).
std::vector<Request> all_at_once(const std::vector<Request>& trace);

}  // namespace twin
