#pragma once
// Percentiles by linear interpolation between closest ranks, the method of
// numpy.percentile's default (and so of vLLM's benchmark_serving): for n
// sorted values and p in [0, 100], rank h = (n - 1) * p / 100, and the result
// is x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)]).
#include <span>

namespace twin {

// `sorted` must be ascending. Returns NaN for an empty span.
double percentile_linear(std::span<const double> sorted, double p);

}  // namespace twin
