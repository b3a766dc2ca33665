#pragma once
// The greedy pick of the device argmax (cuda_kernels.cu), shared with the
// CPU tests: the largest non-NaN logit, the lowest id among equal values
// (so -0.0 and +0.0 tie), and id 0 when logit 0 is NaN or nothing qualifies.
// That is exactly sample_reference's scan (`if (x[i] > x[best]) best = i`
// from best = 0). The rule picks the same element whatever order the
// candidates are merged in, so the two-stage reduction (blocks over chunks
// of the vocabulary, then a warp over the chunks) cannot change the answer.
#include <cstdint>

#include "engine/backend/paged_index.hpp"  // TWIN_HOST_DEVICE

namespace twin::argmax {

constexpr int kThreads = 256;          // stage 1 block
constexpr int kPerThread = 16;         // logits a thread reads (4 float4 loads when aligned)
constexpr int kChunk = kThreads * kPerThread;  // logits a stage-1 block reduces

struct Best {
  float v;
  std::int32_t i;  // < 0: none yet
};

TWIN_HOST_DEVICE inline Best none() { return Best{0.0f, -1}; }

TWIN_HOST_DEVICE inline std::int64_t chunks(std::int64_t vocab) { return (vocab + kChunk - 1) / kChunk; }

// Whether candidate (v, i) beats b: b is empty, or v is larger, or equal with a lower id.
TWIN_HOST_DEVICE inline bool better(float v, std::int32_t i, const Best& b) {
  return i >= 0 && (b.i < 0 || v > b.v || (v == b.v && i < b.i));
}

// A logit: NaN is never a candidate.
TWIN_HOST_DEVICE inline void take(Best& b, float v, std::int32_t i) {
  if (v == v && better(v, i, b)) b = Best{v, i};
}

TWIN_HOST_DEVICE inline void merge(Best& b, const Best& o) {
  if (better(o.v, o.i, b)) b = o;
}

// The token: the host's scan never leaves id 0 when logit 0 is NaN.
TWIN_HOST_DEVICE inline std::int32_t token(const Best& b, bool first_is_nan) {
  return first_is_nan || b.i < 0 ? 0 : b.i;
}

// Stage 1's element order: logit `k` (0 .. kPerThread - 1) of thread t in
// chunk c. Vector path: groups of 4 consecutive logits, the block's threads
// side by side (coalesced 16-byte loads); scalar path: stride kThreads.
TWIN_HOST_DEVICE inline std::int64_t element(std::int64_t chunk, int thread, int k, bool vec) {
  const std::int64_t base = chunk * kChunk;
  return vec ? base + 4 * (static_cast<std::int64_t>(k / 4) * kThreads + thread) + k % 4
             : base + static_cast<std::int64_t>(k) * kThreads + thread;
}

}  // namespace twin::argmax
