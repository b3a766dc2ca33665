// Parallel layouts: what check_layout accepts and how weights and KV split.
#include <catch2/catch.hpp>

#include "base/error.hpp"
#include "models/model_desc.hpp"
#include "models/model_math.hpp"

using namespace twin;

TEST_CASE("check_layout accepts divisors and replicated KV heads") {
  auto m = resolve_model("llama-3.1-70b");  // 64 heads, 8 KV heads, 80 layers
  CHECK_NOTHROW(check_layout(m, {8, 1}));
  CHECK_NOTHROW(check_layout(m, {16, 1}));  // each KV head on 2 GPUs
  CHECK(kv_heads_per_gpu(m, 16) == 1);
  CHECK(kv_heads_per_gpu(m, 4) == 2);
  CHECK_NOTHROW(check_layout(m, {1, 80}));
  CHECK_NOTHROW(check_layout(m, {1, 3}));  // uneven stages
}

TEST_CASE("check_layout rejects what cannot be split") {
  auto m = resolve_model("llama-3.1-70b");
  CHECK_THROWS_AS(check_layout(m, {3, 1}), UsageError);
  CHECK_THROWS_AS(check_layout(m, {0, 1}), UsageError);
  CHECK_THROWS_AS(check_layout(m, {1, 0}), UsageError);
  CHECK_THROWS_AS(check_layout(m, {1, 81}), UsageError);
  auto qwen = resolve_model("qwen2.5-7b");  // 28 heads, 4 KV heads
  CHECK_THROWS_WITH(check_layout(qwen, {8, 1}), Catch::Contains("num_attention_heads=28"));
  auto yi = resolve_model("yi-34b");  // 56 heads, 8 KV heads: tp=7 divides 56, not 8
  CHECK_THROWS_WITH(check_layout(yi, {7, 1}), Catch::Contains("num_key_value_heads=8"));
}

TEST_CASE("stage sizes differ by at most one and sum to the layers") {
  auto m = resolve_model("llama-3.1-405b");  // 126 layers
  for (int pp : {1, 2, 4, 5, 8, 16}) {
    int64_t sum = 0, lo = 1 << 30, hi = 0;
    for (int s = 0; s < pp; ++s) {
      const int64_t n = stage_layers(m, pp, s);
      sum += n;
      lo = std::min(lo, n);
      hi = std::max(hi, n);
    }
    CHECK(sum == 126);
    CHECK(hi - lo <= 1);
  }
}

TEST_CASE("per-GPU weights and KV split over TP and PP") {
  auto m = resolve_model("llama-2-7b");
  const int64_t whole = weight_bytes(m, Dtype::fp16);
  CHECK(weight_bytes_per_gpu(m, Dtype::fp16, {1, 1}, 0) == whole);
  int64_t pp_sum = 0;
  for (int s = 0; s < 4; ++s) pp_sum += weight_bytes_per_gpu(m, Dtype::fp16, {1, 4}, s);
  CHECK(pp_sum == whole);
  // TP=2: everything sharded except the norm weights, replicated.
  const int64_t tp2 = weight_bytes_per_gpu(m, Dtype::fp16, {2, 1}, 0);
  const int64_t norms = (2 * m.num_hidden_layers + 1) * m.hidden_size * 2;
  CHECK(2 * tp2 == whole + norms);
  CHECK(kv_bytes_per_token_per_gpu(m, Dtype::fp16, {2, 1}, 0) * 2 == kv_bytes_per_token(m, Dtype::fp16));
  int64_t kv_sum = 0;
  for (int s = 0; s < 3; ++s) kv_sum += kv_bytes_per_token_per_gpu(m, Dtype::fp16, {1, 3}, s);
  CHECK(kv_sum == kv_bytes_per_token(m, Dtype::fp16));
}
