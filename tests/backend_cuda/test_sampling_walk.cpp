// The sampling arithmetic the CUDA kernels use (engine/backend/sampling_walk.hpp),
// checked on the CPU against sample_reference: these tests run everywhere,
// GPU or not. The device pipeline is emulated step for step (fmaxf max,
// sampling::prob, a stable sort by probability descending as the radix sort
// does, sampling::Walk fed in tiles as the walk kernel does); with the host's
// exp on both sides the tokens must be identical.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "engine/backend/sampling.hpp"
#include "engine/backend/sampling_walk.hpp"

using namespace twin;

namespace {

// The walk kernel's loop: the sorted row staged a tile at a time, the walk
// fed what of the tile it asks for.
std::int64_t walk_in_tiles(const std::vector<double>& sorted, std::int32_t top_k, float top_p, double u,
                           std::int64_t tile_size) {
  const auto vocab = static_cast<std::int64_t>(sorted.size());
  sampling::Walk walk(vocab, top_k, top_p, u);
  std::vector<double> tile(static_cast<std::size_t>(tile_size));
  while (!walk.done()) {
    const std::int64_t start = walk.next();
    const std::int64_t len = std::min(tile_size, vocab - start);
    std::copy(sorted.begin() + start, sorted.begin() + start + len, tile.begin());
    while (!walk.done() && walk.next() >= start && walk.next() < start + len) {
      walk.feed(tile.data() + (walk.next() - start), start + len - walk.next());
    }
  }
  return walk.result();
}

TokenId device_pipeline(const std::vector<float>& logits, const SamplingParams& p, std::int64_t tile_size) {
  const auto vocab = static_cast<std::int64_t>(logits.size());
  float max_logit = -INFINITY;
  for (const float l : logits) max_logit = std::fmax(max_logit, l);
  if (!sampling::has_max(max_logit)) return 0;
  const double inv_t = 1.0 / static_cast<double>(p.temperature);
  std::vector<double> prob(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) prob[i] = sampling::prob(logits[i], max_logit, inv_t);
  std::vector<std::int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](std::int32_t a, std::int32_t b) { return prob[a] > prob[b]; });
  std::vector<double> sorted(logits.size());
  for (std::size_t i = 0; i < ids.size(); ++i) sorted[i] = prob[static_cast<std::size_t>(ids[i])];
  const double u = sampling_uniform(p.seed, p.request, p.token_index);
  const std::int64_t pos = sampling::walk(sorted.data(), vocab, p.top_k, p.top_p, u);
  REQUIRE(walk_in_tiles(sorted, p.top_k, p.top_p, u, tile_size) == pos);
  return ids[static_cast<std::size_t>(pos)];
}

}  // namespace

TEST_CASE("sampling::walk keeps top-k, then the top-p prefix, then walks the draw") {
  const std::vector<double> p = {0.5, 0.3, 0.2};
  CHECK(sampling::walk(p.data(), 3, 0, 1.0f, 0.0) == 0);
  CHECK(sampling::walk(p.data(), 3, 0, 1.0f, 0.5) == 1);  // u * mass == 0.5: not < 0.5, next token
  CHECK(sampling::walk(p.data(), 3, 0, 1.0f, 0.99) == 2);
  CHECK(sampling::walk(p.data(), 3, 2, 1.0f, 0.7) == 1);    // mass 0.8: draws 0.56
  CHECK(sampling::walk(p.data(), 3, 2, 1.0f, 0.99) == 1);   // never past top_k
  CHECK(sampling::walk(p.data(), 3, 10, 1.0f, 0.99) == 2);  // top_k past vocab: no cut
  CHECK(sampling::walk(p.data(), 3, 0, 0.5f, 0.99) == 0);   // the prefix {0} reaches half the mass
  CHECK(sampling::walk(p.data(), 3, 0, 0.6f, 0.99) == 1);
  CHECK(sampling::walk(p.data(), 3, 0, 0.0f, 0.99) == 0);   // at least one token
  // Fed one probability at a time: the same positions.
  for (const std::int32_t top_k : {0, 2}) {
    for (const float top_p : {1.0f, 0.6f, 0.0f}) {
      for (const double u : {0.0, 0.3, 0.5, 0.7, 0.99}) {
        CHECK(walk_in_tiles(p, top_k, top_p, u, 1) == sampling::walk(p.data(), 3, top_k, top_p, u));
      }
    }
  }
  const std::vector<double> zeros = {0.0, 0.0, 0.0};
  CHECK(sampling::walk(zeros.data(), 3, 0, 1.0f, 0.3) == 2);  // no mass: the last kept
  CHECK(sampling::walk(zeros.data(), 3, 0, 0.9f, 0.3) == 0);
}

TEST_CASE("sampling::prob: exp of the scaled gap, NaN to 0, +inf takes all") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(sampling::prob(2.0f, 2.0f, 1.0) == 1.0);
  CHECK(sampling::prob(1.0f, 2.0f, 0.5) == std::exp(-0.5));
  CHECK(sampling::prob(-inf, 2.0f, 1.0) == 0.0);
  CHECK(sampling::prob(nan, 2.0f, 1.0) == 0.0);
  CHECK(sampling::prob(1.0f, 2.0f, std::nan("")) == 0.0);
  CHECK(sampling::prob(inf, inf, 1.0) == 1.0);
  CHECK(sampling::prob(5.0f, inf, 1.0) == 0.0);
  CHECK(sampling::prob(nan, inf, 1.0) == 0.0);
  CHECK(sampling::has_max(-1e30f));
  CHECK(sampling::has_max(inf));
  CHECK_FALSE(sampling::has_max(-inf));
}

TEST_CASE("the emulated device pipeline gives sample_reference's tokens on random rows") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937 rng(20240611);
  const std::vector<std::int64_t> vocabs = {1, 2, 3, 17, 256, 1000, 4099};
  const std::vector<float> temperatures = {0.05f, 0.7f, 1.0f, 1.5f, 40.0f};
  const std::vector<float> top_ps = {1.0f, 0.95f, 0.9f, 0.5f, 0.01f, 0.0f};
  const std::int64_t tile_sizes[] = {1, 7, 64, 4096};  // 4096: the kernel's
  int rows = 0, not_first = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    const std::int64_t vocab = vocabs[static_cast<std::size_t>(trial) % vocabs.size()];
    std::normal_distribution<float> normal(0.0f, 1.0f + static_cast<float>(trial % 4) * 3.0f);
    std::vector<float> row(static_cast<std::size_t>(vocab));
    for (float& l : row) l = normal(rng);
    const int shape = trial % 6;
    if (shape == 1) {
      for (float& l : row) l = std::round(l * 2.0f) / 2.0f;  // many ties
    } else if (shape == 2) {
      std::uniform_int_distribution<std::size_t> at(0, row.size() - 1);
      for (int i = 0; i < 3; ++i) row[at(rng)] = nan;
      row[at(rng)] = -inf;
    } else if (shape == 3) {
      row[0] = nan;  // where the greedy scan would stay
    } else if (shape == 4 && trial % 12 == 4) {
      std::uniform_int_distribution<std::size_t> at(0, row.size() - 1);
      row[at(rng)] = inf;
      row[at(rng)] = inf;
    } else if (shape == 5 && trial % 30 == 5) {
      std::fill(row.begin(), row.end(), trial % 60 == 5 ? -inf : nan);
    }
    SamplingParams p;
    p.temperature = temperatures[static_cast<std::size_t>(trial / 7) % temperatures.size()];
    const auto v = static_cast<std::int32_t>(vocab);
    const std::int32_t top_ks[] = {0, 2, 5, 50, v, v + 10};
    p.top_k = top_ks[static_cast<std::size_t>(trial / 3) % 6];
    if (p.top_k == 1) p.top_k = 0;  // top_k 1 is greedy, not this path
    p.top_p = top_ps[static_cast<std::size_t>(trial / 5) % top_ps.size()];
    p.seed = static_cast<std::uint64_t>(trial % 5);
    p.request = trial;
    for (std::int64_t t = 0; t < 4; ++t) {
      p.token_index = t;
      const TokenId want = sample_reference(row.data(), vocab, p);
      const TokenId got = device_pipeline(row, p, tile_sizes[static_cast<std::size_t>(trial + t) % 4]);
      INFO("trial " << trial << " vocab " << vocab << " token " << t);
      REQUIRE(got == want);
      ++rows;
      not_first += want != 0 ? 1 : 0;
    }
  }
  CHECK(rows == 6000);
  CHECK(not_first > 3000);  // the draws do spread over the vocabulary
}
