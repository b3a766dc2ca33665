#include "metrics/peak_tally.hpp"

#include <algorithm>

namespace twin {
namespace {

std::int64_t second_of(Time t) { return t / kNsPerSec; }

}  // namespace

void PeakTally::add(const RequestRecord& r) {
  if (r.outcome != Outcome::finished || r.first_token == kNoTime) return;
  // Consecutive tokens mostly share a second: one map update per second.
  Time t = r.first_token;
  std::int64_t second = second_of(t);
  std::uint64_t in_second = 1;
  for (const Time gap : r.itl) {
    t += gap;
    const std::int64_t s = second_of(t);
    if (s != second) {
      tokens_[second] += in_second;
      second = s;
      in_second = 0;
    }
    ++in_second;
  }
  tokens_[second] += in_second;
  ++active_delta_[second_of(r.arrival)];
  --active_delta_[second_of(r.finish) + 1];
}

std::uint64_t PeakTally::max_output_tokens_per_s() const {
  std::uint64_t peak = 0;
  for (const auto& [second, tokens] : tokens_) peak = std::max(peak, tokens);
  return peak;
}

std::uint64_t PeakTally::max_concurrent_requests() const {
  // Active requests change only at the seconds in the map: the running sum
  // there is every second's count.
  std::int64_t active = 0, peak = 0;
  for (const auto& [second, delta] : active_delta_) {
    active += delta;
    peak = std::max(peak, active);
  }
  return static_cast<std::uint64_t>(peak);
}

}  // namespace twin
