#include "engine/core/timeline.hpp"

#include <cmath>

namespace twin {

void replay_faster(Request& r, Time origin, double speedup) {
  const Time arrival = static_cast<Time>(std::llround(static_cast<double>(r.arrival - origin) / speedup));
  if (r.cancel_time != kNoTime) {
    r.cancel_time = arrival + static_cast<Time>(std::llround(static_cast<double>(r.cancel_time - r.arrival) / speedup));
  }
  r.arrival = arrival;
}

void arrive_at_once(Request& r) {
  if (r.cancel_time != kNoTime) r.cancel_time -= r.arrival;
  r.arrival = 0;
}

}  // namespace twin
