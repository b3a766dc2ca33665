#pragma once
// A seeded Poisson workload for the fit-recovery tests: arrivals at `rate`
// req/s, prompt and output lengths uniform in their ranges. Same seed, same
// requests.
#include <cstdint>
#include <random>
#include <vector>

#include "base/types.hpp"
#include "engine/core/request.hpp"

namespace twin::test {

struct LengthRange {
  int lo = 1, hi = 1;
};

inline std::vector<Request> poisson_workload(double rate, int n, std::uint32_t seed, LengthRange prompts,
                                             LengthRange outputs) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  std::uniform_int_distribution<int> prompt(prompts.lo, prompts.hi), output(outputs.lo, outputs.hi);
  std::vector<Request> out;
  double t = 0;
  for (int i = 0; i < n; ++i) {
    Request r;
    r.id = static_cast<RequestId>(i);
    r.arrival = from_seconds(t);
    r.prompt_len = prompt(rng);
    r.output_len = output(rng);
    out.push_back(r);
    t += gap(rng);
  }
  return out;
}

}  // namespace twin::test
