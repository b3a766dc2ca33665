#include "engine/core/serving_loop.hpp"

namespace twin {
namespace {

// "12.000000345 s": a time as traces write it, without <cstdio> in the core.
std::string seconds_text(Time t) {
  const bool negative = t < 0;
  const Time magnitude = negative ? -t : t;
  std::string frac = std::to_string(magnitude % kNsPerSec);
  frac.insert(0, 9 - frac.size(), '0');
  return (negative ? "-" : "") + std::to_string(magnitude / kNsPerSec) + "." + frac + " s";
}

}  // namespace

void check_arrival_order(const Request& request, Time previous) {
  if (request.arrival >= previous) return;
  throw Error("request " + std::to_string(request.id) + " arrives at " + seconds_text(request.arrival) +
              ", before " + (previous == 0 ? std::string("time 0") : "the request read before it (" + seconds_text(previous) + ")") +
              ": a request source must give requests in arrival order (a trace reader settles a trace's own"
              " small disorder within --backwards-tolerance-s)");
}

}  // namespace twin
