// run --quantization int8: the projections quantised at load to int8 with
// per-channel scales. The runner's logits equal the dense reference run on
// the dequantised weights (f32 rounding only), stay close to the float
// model's, and the weights take the bytes they are stored in.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "engine/runtime/model_runner.hpp"
#include "tests/runtime/test_support.hpp"

namespace twin::test {
namespace {

// The rule the loader applies, on the reference's weights: per row of each
// projection (q, k, v, o, gate, up, down, and a MoE's experts' w1, w3, w2),
// scale = max |w| / 127.
WeightMap dequantized(const ModelConfig& c, WeightMap w) {
  auto cols_of = [&](const std::string& name) -> std::int64_t {
    if (name.find("o_proj") != std::string::npos) return c.q_dim();
    if (name.find("down_proj") != std::string::npos || name.ends_with("w2.weight")) return c.intermediate_size;
    return c.hidden_size;
  };
  for (auto& [name, values] : w) {
    const bool expert = name.find(".experts.") != std::string::npos;
    const bool projection = name.find("_proj.weight") != std::string::npos || expert;
    if (!projection) continue;
    const std::int64_t cols = cols_of(name), rows = static_cast<std::int64_t>(values.size()) / cols;
    for (std::int64_t r = 0; r < rows; ++r) {
      float* row = values.data() + r * cols;
      float top = 0.0f;
      for (std::int64_t i = 0; i < cols; ++i) top = std::max(top, std::fabs(row[i]));
      const float scale = top > 0 ? top / 127.0f : 1.0f;
      for (std::int64_t i = 0; i < cols; ++i) row[i] = std::clamp(std::nearbyint(row[i] / scale), -127.0f, 127.0f) * scale;
    }
  }
  return w;
}

std::unique_ptr<ModelRunner> int8_runner(const ModelConfig& config, const std::string& dir) {
  return quantized_runner(config, dir, "int8");
}

// Decodes 5 tokens after a 29-token prompt with int8 weights and checks each
// step's logits against the reference model on the dequantised weights.
void check_int8_decode(const ModelConfig& config, const std::string& name) {
  const WeightMap weights = random_weights(config, 7);
  const std::string dir = write_checkpoint(temp_dir(name), config, weights, "F32");
  auto runner = int8_runner(config, dir);
  const WeightMap deq = dequantized(config, weights);
  std::vector<std::int32_t> tokens = some_tokens(29, 256, 5);
  const auto table = scattered_blocks(16, 64, 3);
  ForwardBatch batch;
  ForwardOutput out;
  add_seq(batch, 1, tokens, 0, static_cast<std::int32_t>(tokens.size()), table);
  for (int step = 0; step <= 4; ++step) {
    runner->forward(batch, out);
    REQUIRE(out.logits.size() == 256);
    INFO("step " << step);
    // Tolerance 2e-3: the same as the float runner against its reference
    // (fp32 in a different summation order; logits are O(1)).
    CHECK(max_abs_diff(out.logits.data(), reference_logits(config, deq, tokens).back().data(), 256) < 2e-3f);
    // The quantisation itself moves the logits, by far less than their size.
    const float moved = max_abs_diff(out.logits.data(), reference_logits(config, weights, tokens).back().data(), 256);
    CHECK(moved > 0.0f);
    CHECK(moved < 0.1f);
    tokens.push_back(out.sampled.at(0));
    batch.clear();
    add_seq(batch, 1, tokens, static_cast<std::int32_t>(tokens.size()) - 1, 1, table);
  }
}

}  // namespace

TEST_CASE("int8 weight-only decode equals the dequantised reference and stays near the float model", "[int8]") {
  check_int8_decode(tiny_config(false, false, 0), "int8");
}

TEST_CASE("int8 weight-only MoE: the experts too, against the dequantised reference", "[int8]") {
  // Four experts, top 2: the router stays f32 (it is not a projection).
  check_int8_decode(tiny_config(false, false, 4), "int8_moe");
}

TEST_CASE("int8 weights are counted in the bytes they are stored in", "[int8]") {
  const ModelConfig config = tiny_config(false, false, 0);
  const std::string dir = write_checkpoint(temp_dir("int8_bytes"), config, random_weights(config, 3), "F32");
  auto f32 = make_runner(config, dir);
  auto i8 = int8_runner(config, dir);
  const std::int64_t H = config.hidden_size, I = config.intermediate_size;
  const std::int64_t qkv_rows = config.q_dim() + 2 * config.kv_dim();
  const std::int64_t proj = qkv_rows * H + H * config.q_dim() + 2 * I * H + H * I;  // weights per layer
  const std::int64_t scales = qkv_rows + H + 2 * I + H;                              // one per output row
  // A projection weight goes from 4 bytes to 1, plus a 4-byte scale per row.
  CHECK(f32->weight_bytes() - i8->weight_bytes() == config.num_layers * (3 * proj - 4 * scales));
  CHECK(i8->weight_dtype_name() == "f32");  // the embedding, LM head and norms keep the model's dtype
}

TEST_CASE("int8 quantization refuses what the engine does not run, by name", "[int8]") {
  RunnerOptions o;
  o.threads = 1;
  o.num_blocks = 8;
  o.quantization = "awq";
  CHECK_THROWS_WITH(ModelRunner(tiny_config(false, false, 0), o), Catch::Contains("simulator only"));
}

}  // namespace twin::test
