// run --quantization fp8 (W8A8, engine/backend/fp8_rows.hpp): the
// projections in E4M3 with per-channel scales, activations scaled per token
// at each GEMM. The logits stay near the float model's (each operand within
// 1/16 of itself), the weights take one byte per element plus a scale per
// row, and a MoE model is refused by name.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/runtime/model_runner.hpp"
#include "tests/runtime/test_support.hpp"

namespace twin::test {
namespace {

std::unique_ptr<ModelRunner> fp8_runner(const ModelConfig& config, const std::string& dir) {
  return quantized_runner(config, dir, "fp8");
}

}  // namespace

TEST_CASE("fp8 W8A8 decode stays near the float model", "[fp8]") {
  const ModelConfig config = tiny_config(false, false, 0);
  const WeightMap weights = random_weights(config, 7);
  const std::string dir = write_checkpoint(temp_dir("fp8"), config, weights, "F32");
  auto runner = fp8_runner(config, dir);
  std::vector<std::int32_t> tokens = some_tokens(29, 256, 5);
  const auto table = scattered_blocks(16, 64, 3);
  ForwardBatch batch;
  ForwardOutput out;
  add_seq(batch, 1, tokens, 0, static_cast<std::int32_t>(tokens.size()), table);
  for (int step = 0; step <= 4; ++step) {
    runner->forward(batch, out);
    REQUIRE(out.logits.size() == 256);
    INFO("step " << step);
    const std::vector<float> want = reference_logits(config, weights, tokens).back();
    const float moved = max_abs_diff(out.logits.data(), want.data(), 256);
    float top = 0.0f;  // the logits' largest magnitude
    for (const float x : want) top = std::max(top, std::fabs(x));
    CAPTURE(moved, top);
    CHECK(moved > 0.0f);  // the quantisation ran
    // and moved the logits by a fraction of their size: E4M3 keeps 3
    // mantissa bits (each operand within 1/16 of itself), about 4% per GEMM
    // on random weights, over 9 GEMMs here; up to 0.11 x top measured.
    CHECK(moved < 0.2f * top);
    tokens.push_back(out.sampled.at(0));
    batch.clear();
    add_seq(batch, 1, tokens, static_cast<std::int32_t>(tokens.size()) - 1, 1, table);
  }
}

TEST_CASE("fp8 weights are counted in the bytes they are stored in, and MoE models are refused", "[fp8]") {
  const ModelConfig config = tiny_config(false, false, 0);
  const std::string dir = write_checkpoint(temp_dir("fp8_bytes"), config, random_weights(config, 3), "F32");
  auto f32 = make_runner(config, dir);
  auto f8 = fp8_runner(config, dir);
  const std::int64_t H = config.hidden_size, I = config.intermediate_size;
  const std::int64_t qkv_rows = config.q_dim() + 2 * config.kv_dim();
  const std::int64_t proj = qkv_rows * H + H * config.q_dim() + 2 * I * H + H * I;
  const std::int64_t scales = qkv_rows + H + 2 * I + H;
  CHECK(f32->weight_bytes() - f8->weight_bytes() == config.num_layers * (3 * proj - 4 * scales));

  RunnerOptions o;
  o.threads = 1;
  o.num_blocks = 8;
  o.quantization = "fp8";
  CHECK_THROWS_WITH(ModelRunner(tiny_config(false, false, 4), o), Catch::Contains("--quantization fp8: dense models only"));
}

}  // namespace twin::test
