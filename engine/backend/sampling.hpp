#pragma once
// The sampling rule every backend implements, and its host reference.
// The random number for a draw is a pure function of (seed, request,
// token_index): a counter-based generator (splitmix64 finaliser over the
// mixed key), so it does not depend on batch composition, thread count or
// the order requests are sampled in. Plain integer arithmetic, so a device
// kernel can compute the same value.
#include <cstdint>

#include "engine/backend/op_args.hpp"

namespace twin {

constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) with 53 random bits.
constexpr double sampling_uniform(std::uint64_t seed, std::int64_t request, std::int64_t token_index) {
  std::uint64_t h = splitmix64(seed);
  h = splitmix64(h ^ static_cast<std::uint64_t>(request));
  h = splitmix64(h ^ static_cast<std::uint64_t>(token_index));
  return static_cast<double>(h >> 11) * (1.0 / 9007199254740992.0);
}

// Samples one token from logits[0, vocab):
// - temperature <= 0 or top_k == 1: argmax, lowest id on ties;
// - otherwise probabilities p = softmax(logits / temperature) in double,
//   ordered by p descending then id ascending; keep the first top_k (if > 0),
//   then the shortest prefix whose mass reaches top_p (at least one token);
//   draw u * (kept mass) and walk the kept tokens in that order.
// Non-finite logits: the softmax is taken from the largest non-NaN logit
// and a NaN logit gets probability 0. If that maximum is +inf,
// every +inf logit gets probability 1 and every other logit 0. If there is
// no such maximum (every logit NaN or -inf), the result is the greedy
// argmax's, which is id 0 for such a row.
// The CUDA backend repeats this on the device (engine/backend/sampling_walk.hpp
// holds the shared arithmetic).
TokenId sample_reference(const float* logits, std::int64_t vocab, const SamplingParams& params);

}  // namespace twin
