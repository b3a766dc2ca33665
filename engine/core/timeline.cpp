#include "engine/core/timeline.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>

#include "base/error.hpp"

namespace twin {
namespace {

// Shortest text that reads back as x ("0.001", "1e-300"): to_string's six
// fixed decimals would show a tiny speedup as 0.
std::string number_text(double x) {
  char buf[32];
  const auto end = std::to_chars(buf, buf + sizeof buf, x).ptr;
  return std::string(buf, end);
}

}  // namespace

void replay_faster(Request& r, Time origin, double speedup) {
  if (!(speedup > 0) || !std::isfinite(speedup)) {
    throw UsageError("a trace can only be replayed faster by a finite factor > 0, not " + number_text(speedup));
  }
  // A slow replay of a late arrival can leave the clock's range (int64 ns,
  // about 292 years); llround would then return garbage, seen later as a
  // request arriving out of order. At speedup 1 times stay exact (a double
  // holds only 2^53 ns, about 104 days, exactly).
  auto scaled = [&](Time t) {
    if (speedup == 1.0) return t;
    const double x = static_cast<double>(t) / speedup;
    if (!(std::fabs(x) < 9.2e18)) {
      throw Error("request " + std::to_string(r.id) + ": a time of " + number_text(static_cast<double>(t) / 1e9) +
                  " s replayed " + number_text(speedup) + " times faster is beyond the clock's range (about 292 years)");
    }
    return static_cast<Time>(std::llround(x));
  };
  const Time arrival = scaled(r.arrival - origin);
  if (r.cancel_time != kNoTime) r.cancel_time = arrival + std::max<Time>(0, scaled(r.cancel_time - r.arrival));
  r.arrival = arrival;
}

void arrive_at_once(Request& r) {
  if (r.cancel_time != kNoTime) r.cancel_time = std::max<Time>(0, r.cancel_time - r.arrival);
  r.arrival = 0;
}

ReplayedSource::ReplayedSource(RequestSource& source, Mode mode, double speedup)
    : source_(source), mode_(mode), speedup_(speedup) {
  if (mode_ == Mode::faster && (!(speedup_ > 0) || !std::isfinite(speedup_))) {
    throw UsageError("time scale must be a finite number > 0");
  }
}

bool ReplayedSource::next(Request& out) {
  if (!source_.next(out)) return false;
  if (mode_ == Mode::at_once) {
    arrive_at_once(out);
  } else {
    replay_faster(out, 0, speedup_);
  }
  return true;
}

}  // namespace twin
