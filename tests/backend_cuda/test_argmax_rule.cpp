// The device greedy argmax (cuda_kernels.cu: argmax_chunks_kernel, then
// argmax_merge_kernel) replayed on the CPU through its shared rule
// (engine/backend/cuda/argmax_rule.hpp) and compared with the host's
// sample_reference at temperature 0. The emulation repeats the kernels'
// loop skeleton (each thread's elements, the warps' xor-shuffle merges, the
// merge kernel's lanes over chunks); the rule itself is the shared code.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "engine/backend/cuda/argmax_rule.hpp"
#include "engine/backend/sampling.hpp"

namespace {

using namespace twin;

argmax::Best warp_best(std::vector<argmax::Best> lanes) {  // 32 lanes, xor butterfly as __shfl_xor_sync
  for (int o = 16; o > 0; o >>= 1) {
    const std::vector<argmax::Best> before = lanes;
    for (int l = 0; l < 32; ++l) argmax::merge(lanes[l], before[static_cast<std::size_t>(l ^ o)]);
  }
  for (int l = 1; l < 32; ++l) {
    if (lanes[l].i != lanes[0].i) FAIL("the lanes of a warp disagree after the butterfly");
  }
  return lanes[0];
}

std::int32_t device_argmax(const std::vector<float>& x, std::int64_t vocab, bool vec) {
  const std::int64_t chunks = argmax::chunks(vocab < 1 ? 1 : vocab);
  std::vector<argmax::Best> partials(static_cast<std::size_t>(chunks));
  for (std::int64_t c = 0; c < chunks; ++c) {
    std::vector<argmax::Best> warps;
    std::vector<argmax::Best> lanes;
    for (int t = 0; t < argmax::kThreads; ++t) {
      argmax::Best b = argmax::none();
      for (int k = 0; k < argmax::kPerThread; ++k) {
        const std::int64_t e = argmax::element(c, t, k, vec);
        argmax::take(b, e < vocab ? x[static_cast<std::size_t>(e)] : NAN, static_cast<std::int32_t>(e));
      }
      lanes.push_back(b);
      if (lanes.size() == 32) {
        warps.push_back(warp_best(lanes));
        lanes.clear();
      }
    }
    warps.resize(32, argmax::none());
    partials[static_cast<std::size_t>(c)] = warp_best(warps);
  }
  std::vector<argmax::Best> lanes(32, argmax::none());
  for (std::int64_t c = 0; c < chunks; ++c) argmax::merge(lanes[static_cast<std::size_t>(c % 32)], partials[static_cast<std::size_t>(c)]);
  const float first = vocab > 0 ? x[0] : 0.0f;
  return argmax::token(warp_best(lanes), first != first);
}

TEST_CASE("argmax rule: stage-1 threads read every logit of a chunk once, both paths") {
  for (bool vec : {false, true}) {
    std::vector<int> seen(argmax::kChunk, 0);
    for (int t = 0; t < argmax::kThreads; ++t) {
      for (int k = 0; k < argmax::kPerThread; ++k) {
        const std::int64_t e = argmax::element(2, t, k, vec) - 2 * argmax::kChunk;
        REQUIRE(e >= 0);
        REQUIRE(e < argmax::kChunk);
        seen[static_cast<std::size_t>(e)] += 1;
        if (vec && k % 4 == 0) CHECK(e % 4 == 0);  // float4-aligned
      }
    }
    CHECK(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
  }
}

TEST_CASE("argmax rule: the two-stage device reduction picks sample_reference's greedy token") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937 rng(9);
  SamplingParams greedy;  // temperature 0
  int rows = 0;
  for (std::int64_t vocab : {std::int64_t{0}, std::int64_t{1}, std::int64_t{3}, std::int64_t{4}, std::int64_t{31},
                             std::int64_t{4095}, std::int64_t{4096}, std::int64_t{4097}, std::int64_t{10000},
                             std::int64_t{128256}}) {
    const int trials = vocab > 10000 ? 12 : 150;
    for (int trial = 0; trial < trials; ++trial) {
      std::vector<float> x(static_cast<std::size_t>(vocab));
      const int mode = trial % 6;
      std::uniform_int_distribution<int> small(-3, 3);
      for (float& v : x) v = mode == 0 ? static_cast<float>(small(rng)) : std::uniform_real_distribution<float>(-5, 5)(rng);
      if (vocab > 0) {
        std::uniform_int_distribution<std::int64_t> pick(0, vocab - 1);
        for (int j = 0; j < 5; ++j) {
          const std::int64_t i = pick(rng);
          switch (mode) {
            case 1: x[static_cast<std::size_t>(i)] = nan; break;
            case 2: x[static_cast<std::size_t>(i)] = inf; break;
            case 3: x[static_cast<std::size_t>(i)] = 9.0f; break;  // tied maxima
            case 4: x[static_cast<std::size_t>(i)] = j % 2 == 0 ? 0.0f : -0.0f; break;
            default: break;
          }
        }
        if (mode == 4) std::fill(x.begin(), x.end(), trial % 12 < 6 ? -inf : -0.0f), x.back() = 0.0f;  // signed zeros tie
        if (mode == 5 && trial % 4 == 1) x[0] = nan;  // the host never leaves id 0
        if (mode == 5 && trial % 4 == 3) std::fill(x.begin(), x.end(), nan);
      }
      const std::int32_t want = sample_reference(x.data(), vocab, greedy);
      INFO("vocab " << vocab << " trial " << trial);
      CHECK(device_argmax(x, vocab, false) == want);
      if (vocab % 4 == 0) CHECK(device_argmax(x, vocab, true) == want);
      ++rows;
    }
  }
  CHECK(rows > 1000);
}

}  // namespace
