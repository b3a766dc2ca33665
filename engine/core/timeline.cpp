#include "engine/core/timeline.hpp"

#include <cmath>
#include <string>

#include "base/error.hpp"

namespace twin {

void replay_faster(Request& r, Time origin, double speedup) {
  // A slow replay of a late arrival can leave the clock's range (int64 ns,
  // about 292 years); llround would then return garbage, seen later as a
  // request arriving out of order.
  auto scaled = [&](Time t) {
    const double x = static_cast<double>(t) / speedup;
    if (!(std::fabs(x) < 9.2e18)) {
      throw Error("request " + std::to_string(r.id) + ": a time of " + std::to_string(static_cast<double>(t) / 1e9) +
                  " s replayed at time scale " + std::to_string(speedup) +
                  " is beyond the clock's range (about 292 years)");
    }
    return static_cast<Time>(std::llround(x));
  };
  const Time arrival = scaled(r.arrival - origin);
  if (r.cancel_time != kNoTime) r.cancel_time = arrival + scaled(r.cancel_time - r.arrival);
  r.arrival = arrival;
}

void arrive_at_once(Request& r) {
  if (r.cancel_time != kNoTime) r.cancel_time -= r.arrival;
  r.arrival = 0;
}

}  // namespace twin
