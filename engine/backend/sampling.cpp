#include "engine/backend/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "engine/backend/sampling_walk.hpp"

namespace twin {

namespace {

TokenId argmax(const float* logits, std::int64_t vocab) {
  std::int64_t best = 0;
  for (std::int64_t i = 1; i < vocab; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return static_cast<TokenId>(best);
}

}  // namespace

TokenId sample_reference(const float* logits, std::int64_t vocab, const SamplingParams& params) {
  if (vocab <= 0) return 0;
  if (params.temperature <= 0.0f || params.top_k == 1) return argmax(logits, vocab);

  // The largest non-NaN logit: NaN compares false, so it never wins.
  float max_logit = -INFINITY;
  for (std::int64_t i = 0; i < vocab; ++i) {
    if (logits[i] > max_logit) max_logit = logits[i];
  }
  if (!sampling::has_max(max_logit)) return argmax(logits, vocab);
  const double inv_t = 1.0 / static_cast<double>(params.temperature);
  // No NaN in prob (sampling::prob maps it to 0), so by_prob is a strict
  // weak order as std::sort requires.
  std::vector<double> prob(static_cast<std::size_t>(vocab));
  for (std::int64_t i = 0; i < vocab; ++i) prob[i] = sampling::prob(logits[i], max_logit, inv_t);

  std::vector<std::int32_t> order(static_cast<std::size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  auto by_prob = [&](std::int32_t a, std::int32_t b) { return prob[a] > prob[b] || (prob[a] == prob[b] && a < b); };
  std::int64_t kept = vocab;
  if (params.top_k > 0 && params.top_k < vocab) {
    kept = params.top_k;
    std::partial_sort(order.begin(), order.begin() + kept, order.end(), by_prob);
  } else {
    std::sort(order.begin(), order.end(), by_prob);
  }

  double kept_mass = 0.0;
  for (std::int64_t i = 0; i < kept; ++i) kept_mass += prob[order[i]];
  if (params.top_p < 1.0f) {
    const double target = static_cast<double>(params.top_p) * kept_mass;
    double mass = 0.0;
    std::int64_t n = 0;
    while (n < kept) {
      mass += prob[order[n]];
      ++n;
      if (mass >= target) break;
    }
    kept = std::max<std::int64_t>(n, 1);
    kept_mass = mass;
  }

  const double u = sampling_uniform(params.seed, params.request, params.token_index) * kept_mass;
  double acc = 0.0;
  for (std::int64_t i = 0; i < kept; ++i) {
    acc += prob[order[i]];
    if (u < acc) return order[i];
  }
  return order[kept - 1];
}

}  // namespace twin
