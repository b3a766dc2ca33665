// MoE routing and expert FFN against loops; sampling rules and determinism.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <limits>
#include <numeric>
#include <set>

#include "engine/backend/cpu/cpu_backend.hpp"
#include "engine/backend/sampling.hpp"
#include "tests/backend/backend_test_util.hpp"

using namespace twin;
using namespace twin::test;

TEST_CASE("moe_topk keeps the top experts by softmax weight and renormalises like Mixtral") {
  auto be = make_cpu_backend(2);
  const std::int64_t tokens = 5, experts = 8;
  const std::int32_t top_k = 2;
  auto logits = random_floats(tokens * experts, 40, 3.0f);
  logits[3 * experts + 1] = logits[3 * experts + 6] = 10.0f;  // a tie: lower id first
  auto dl = to_device(*be, logits, tokens, experts);
  for (bool renorm : {true, false}) {
    auto ids = zeros(*be, tokens, top_k, ElemType::i32);
    auto wts = zeros(*be, tokens, top_k);
    be->moe_topk(dl.view, top_k, renorm, ids.view, wts.view);
    const auto got_ids = to_host<std::int32_t>(*be, ids.view);
    const auto got_w = to_host(*be, wts.view);
    for (std::int64_t t = 0; t < tokens; ++t) {
      std::vector<double> p(experts);
      double total = 0;
      for (std::int64_t e = 0; e < experts; ++e) total += (p[e] = std::exp(logits[t * experts + e]));
      std::vector<int> order(experts);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
      const double kept = p[order[0]] + p[order[1]];
      for (int j = 0; j < top_k; ++j) {
        CHECK(got_ids[t * top_k + j] == order[j]);
        CHECK(got_w[t * top_k + j] == Approx(renorm ? p[order[j]] / kept : p[order[j]] / total).epsilon(1e-5));
      }
    }
    CHECK(got_ids[3 * top_k] == 1);
    CHECK(got_ids[3 * top_k + 1] == 6);
  }
}

TEST_CASE("moe_experts equals the weighted sum of each chosen expert's SwiGLU FFN") {
  auto be = make_cpu_backend(2);
  const std::int64_t tokens = 6, hidden = 16, inter = 24, experts = 4, top_k = 2;
  const auto x = random_floats(tokens * hidden, 41);
  std::vector<std::vector<float>> gu, dn;
  std::vector<DeviceTensor> dgu, ddn;
  std::vector<TensorView> gu_views, dn_views;
  for (std::int64_t e = 0; e < experts; ++e) {
    gu.push_back(bf16_round(random_floats(2 * inter * hidden, 50 + e, 0.3f)));
    dn.push_back(random_floats(hidden * inter, 60 + e, 0.3f));
    dgu.push_back(to_device(*be, to_bf16(gu.back()), ElemType::bf16, 2 * inter, hidden));  // bf16 and f32 experts mixed
    ddn.push_back(to_device(*be, dn.back(), hidden, inter));
    gu_views.push_back(dgu.back().view);
    dn_views.push_back(ddn.back().view);
  }
  const std::vector<std::int32_t> ids{0, 3, 3, 1, 2, 0, 1, 2, 3, 0, 2, 1};
  const auto wts = random_floats(tokens * top_k, 42);
  auto dx = to_device(*be, x, tokens, hidden);
  auto dids = to_device(*be, ids, ElemType::i32, tokens, top_k);
  auto dw = to_device(*be, wts, tokens, top_k);
  auto out = zeros(*be, tokens, hidden);
  be->moe_experts(dx.view, dids.view, dw.view, ExpertWeights{gu_views, dn_views, {}, {}}, out.view);
  std::vector<float> want(tokens * hidden, 0.0f);
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t j = 0; j < top_k; ++j) {
      const auto e = ids[t * top_k + j];
      std::vector<double> h(inter);
      for (std::int64_t i = 0; i < inter; ++i) {
        double g = 0, u = 0;
        for (std::int64_t c = 0; c < hidden; ++c) {
          g += static_cast<double>(gu[e][i * hidden + c]) * x[t * hidden + c];
          u += static_cast<double>(gu[e][(inter + i) * hidden + c]) * x[t * hidden + c];
        }
        h[i] = g / (1 + std::exp(-g)) * u;
      }
      for (std::int64_t c = 0; c < hidden; ++c) {
        double y = 0;
        for (std::int64_t i = 0; i < inter; ++i) y += dn[e][c * inter + i] * h[i];
        want[t * hidden + c] += static_cast<float>(wts[t * top_k + j] * y);
      }
    }
  CHECK(max_abs_diff(to_host(*be, out.view), want) < 1e-4);
}

namespace {

std::vector<TokenId> sample_rows(Backend& be, const std::vector<float>& logits, std::int64_t vocab,
                                 const std::vector<SamplingParams>& params) {
  auto dl = to_device(be, logits, static_cast<std::int64_t>(params.size()), vocab);
  std::vector<TokenId> out(params.size());
  be.sample(dl.view, params, out);
  return out;
}

}  // namespace

TEST_CASE("greedy sampling is argmax with the lowest id on ties") {
  auto be = make_cpu_backend(2);
  const std::int64_t vocab = 100;
  auto logits = random_floats(3 * vocab, 70);
  logits[2 * vocab + 10] = logits[2 * vocab + 90] = 5.0f;
  const std::vector<SamplingParams> params(3);
  const auto got = sample_rows(*be, logits, vocab, params);
  for (std::int64_t r = 0; r < 2; ++r) {
    const auto row = logits.begin() + r * vocab;
    CHECK(got[r] == std::max_element(row, row + vocab) - row);
  }
  CHECK(got[2] == 10);
}

TEST_CASE("seeded sampling is deterministic and independent of the batch around it") {
  auto be = make_cpu_backend(2);
  const std::int64_t vocab = 64;
  const auto row = random_floats(vocab, 71, 2.0f);
  const SamplingParams p{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = 9, .request = 17, .token_index = 3};
  const TokenId alone = sample_rows(*be, row, vocab, {p})[0];
  // Same row and parameters at a different position in a larger batch.
  std::vector<float> batch = random_floats(4 * vocab, 72);
  std::copy(row.begin(), row.end(), batch.begin() + 2 * vocab);
  std::vector<SamplingParams> params(4, SamplingParams{.temperature = 0.7f, .seed = 1});
  params[2] = p;
  CHECK(sample_rows(*be, batch, vocab, params)[2] == alone);
  CHECK(sample_rows(*be, batch, vocab, params) == sample_rows(*be, batch, vocab, params));
  // Different token indices draw different numbers: over many draws more than one token appears.
  std::map<TokenId, int> seen;
  for (int i = 0; i < 200; ++i) {
    SamplingParams q = p;
    q.token_index = i;
    ++seen[sample_rows(*be, row, vocab, {q})[0]];
  }
  CHECK(seen.size() > 5);
}

TEST_CASE("top-k and top-p only pick allowed tokens, and frequencies follow the probabilities") {
  auto be = make_cpu_backend(2);
  const std::int64_t vocab = 10;
  // Probabilities proportional to exp(logit): tokens 4 > 7 > 1 > the rest.
  std::vector<float> logits(vocab, 0.0f);
  logits[4] = 3.0f;
  logits[7] = 2.5f;
  logits[1] = 2.0f;
  std::map<TokenId, int> topk_counts, topp_counts;
  const int draws = 2000;
  for (int i = 0; i < draws; ++i) {
    const SamplingParams k{.temperature = 1.0f, .top_k = 2, .seed = 5, .request = 1, .token_index = i};
    ++topk_counts[sample_rows(*be, logits, vocab, {k})[0]];
    // p(4) ~ 0.45, p(7) ~ 0.27: top_p 0.6 keeps exactly {4, 7}.
    const SamplingParams pp{.temperature = 1.0f, .top_p = 0.6f, .seed = 5, .request = 2, .token_index = i};
    ++topp_counts[sample_rows(*be, logits, vocab, {pp})[0]];
  }
  for (const auto* counts : {&topk_counts, &topp_counts}) {
    CHECK(counts->size() == 2);
    CHECK(counts->count(4) == 1);
    CHECK(counts->count(7) == 1);
    // Kept mass renormalised: p(4 | {4,7}) = e^3 / (e^3 + e^2.5) ~ 0.622.
    const double share = static_cast<double>(counts->at(4)) / draws;
    CHECK(share == Approx(0.622).margin(0.04));
  }
  // A tiny top_p still keeps one token, the most likely.
  const SamplingParams tiny{.temperature = 1.0f, .top_p = 0.01f, .seed = 3};
  CHECK(sample_rows(*be, logits, vocab, {tiny})[0] == 4);
}

TEST_CASE("sampling with NaN, -inf and +inf logits: NaN is never drawn, +inf takes all the mass") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // Draws over many token indices, with and without cuts: the set of tokens seen.
  auto drawn = [](const std::vector<float>& row, SamplingParams p) {
    std::set<TokenId> seen;
    for (int i = 0; i < 400; ++i) {
      p.token_index = i;
      seen.insert(sample_reference(row.data(), static_cast<std::int64_t>(row.size()), p));
    }
    return seen;
  };
  const SamplingParams plain{.temperature = 1.0f, .seed = 4, .request = 1};
  const SamplingParams cut{.temperature = 0.8f, .top_k = 3, .top_p = 0.9f, .seed = 4, .request = 2};
  // NaN first (where the greedy scan stays) and in the middle: only the finite ids.
  const std::vector<float> with_nan = {nan, 1.0f, nan, 1.0f, 0.5f, -inf};
  CHECK(drawn(with_nan, plain) == std::set<TokenId>{1, 3, 4});
  CHECK(drawn(with_nan, cut) == std::set<TokenId>{1, 3, 4});
  CHECK(drawn(with_nan, SamplingParams{.temperature = 1.0f, .top_p = 0.01f, .seed = 4}) == std::set<TokenId>{1});
  // +inf: the +inf ids share the mass evenly, nothing else is drawn.
  const std::vector<float> with_inf = {0.0f, inf, 50.0f, nan, inf, -inf};
  CHECK(drawn(with_inf, plain) == std::set<TokenId>{1, 4});
  CHECK(drawn(with_inf, cut) == std::set<TokenId>{1, 4});
  CHECK(drawn(with_inf, SamplingParams{.temperature = 1.0f, .top_k = 1, .seed = 4}) == std::set<TokenId>{1});
  CHECK(drawn({nan, inf}, plain) == std::set<TokenId>{1});
  // -inf logits get probability 0 next to a finite maximum.
  CHECK(drawn({-inf, 2.0f, -inf}, plain) == std::set<TokenId>{1});
  // No finite or +inf maximum: the greedy argmax, id 0.
  for (const auto& row : {std::vector<float>(7, nan), std::vector<float>(7, -inf), std::vector<float>{-inf, nan, -inf},
                          std::vector<float>{nan, -inf, nan}}) {
    CHECK(drawn(row, plain) == std::set<TokenId>{0});
    CHECK(drawn(row, cut) == std::set<TokenId>{0});
  }
  // A NaN temperature makes every probability 0 rather than NaN: a defined
  // token (the walk's fallback), the same every time.
  const auto nan_t = drawn({1.0f, 2.0f, 3.0f}, SamplingParams{.temperature = nan, .seed = 4});
  CHECK(nan_t.size() == 1);
}

TEST_CASE("the sampling random number is a pure function of seed, request and token index") {
  CHECK(sampling_uniform(1, 2, 3) == sampling_uniform(1, 2, 3));
  CHECK(sampling_uniform(1, 2, 3) != sampling_uniform(1, 2, 4));
  CHECK(sampling_uniform(1, 2, 3) != sampling_uniform(1, 3, 3));
  CHECK(sampling_uniform(1, 2, 3) != sampling_uniform(2, 2, 3));
  double mean = 0;
  for (int i = 0; i < 10000; ++i) {
    const double u = sampling_uniform(7, 0, i);
    REQUIRE(u >= 0.0);
    REQUIRE(u < 1.0);
    mean += u / 10000;
  }
  CHECK(mean == Approx(0.5).margin(0.02));
}
