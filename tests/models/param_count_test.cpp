// Parameter counts and KV sizes against the published figures.
#include <catch2/catch.hpp>

#include <cmath>

#include "models/model_desc.hpp"
#include "models/model_math.hpp"

using namespace twin;

namespace {
void check_params(const char* name, double published_billions) {
  INFO(name);
  const double got = static_cast<double>(param_count(resolve_model(name))) / 1e9;
  CHECK(std::abs(got - published_billions) / published_billions < 0.005);
}
}  // namespace

TEST_CASE("parameter counts are within 0.5% of the published ones") {
  check_params("llama-2-7b", 6.74);
  check_params("llama-2-13b", 13.02);
  check_params("llama-2-70b", 68.98);
  check_params("llama-3.1-8b", 8.03);
  check_params("llama-3.1-70b", 70.6);
  check_params("llama-3.1-405b", 405.9);
  check_params("mistral-7b", 7.24);
  check_params("mixtral-8x7b", 46.7);
  check_params("qwen2.5-7b", 7.62);
  check_params("qwen2.5-72b", 72.7);
  check_params("yi-34b", 34.39);
}

TEST_CASE("MoE active parameters count only the top-k experts") {
  auto mix = resolve_model("mixtral-8x7b");
  const double active = static_cast<double>(active_param_count(mix)) / 1e9;
  CHECK(std::abs(active - 12.9) / 12.9 < 0.005);
  auto dense = resolve_model("llama-2-7b");
  CHECK(active_param_count(dense) == param_count(dense));
}

TEST_CASE("the small models have the sizes their roles need") {
  // tiny: a few MB for unit tests; small: about 100M parameters.
  CHECK(weight_bytes(resolve_model("tiny"), Dtype::fp32) < 4'000'000);
  const double small = static_cast<double>(param_count(resolve_model("small")));
  CHECK(small > 80e6);
  CHECK(small < 130e6);
}

TEST_CASE("KV bytes per token match the published figures") {
  CHECK(kv_bytes_per_token(resolve_model("llama-2-7b"), Dtype::fp16) == 524'288);
  CHECK(kv_bytes_per_token(resolve_model("llama-3.1-8b"), Dtype::bf16) == 131'072);
  CHECK(kv_bytes_per_token(resolve_model("llama-3.1-8b"), Dtype::fp8) == 65'536);
  CHECK(kv_bytes_per_token(resolve_model("llama-2-70b"), Dtype::fp16) == 327'680);
}

TEST_CASE("weight bytes scale with the dtype") {
  auto m = resolve_model("llama-2-7b");
  CHECK(weight_bytes(m, Dtype::fp16) == 2 * param_count(m));
  CHECK(weight_bytes(m, Dtype::fp8) == param_count(m));
  CHECK(weight_bytes(m, Dtype::fp32) == 4 * param_count(m));
}

TEST_CASE("Qwen2 carries QKV biases without an attention_bias key") {
  auto q = resolve_model("qwen2.5-7b");
  CHECK(q.attention_bias);
  CHECK_FALSE(resolve_model("llama-3.1-8b").attention_bias);
}
