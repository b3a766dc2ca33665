#include "metrics/percentile.hpp"

#include <cmath>
#include <limits>

namespace twin {

double percentile_linear(std::span<const double> sorted, double p) {
  if (sorted.empty()) return std::numeric_limits<double>::quiet_NaN();
  if (p <= 0) return sorted.front();
  if (p >= 100) return sorted.back();
  const double rank = static_cast<double>(sorted.size() - 1) * p / 100.0;
  const auto lower = static_cast<std::size_t>(std::floor(rank));
  if (lower + 1 >= sorted.size()) return sorted.back();
  const double fraction = rank - static_cast<double>(lower);
  return sorted[lower] + fraction * (sorted[lower + 1] - sorted[lower]);
}

}  // namespace twin
