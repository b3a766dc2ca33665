// Per-layer attention kinds (GPT-OSS's alternating sliding-window and full
// layers, chunked local layers): the model read from config.json, each
// kind's attention work bounded by what its layers can see, and the KV one
// request holds when each layer keeps only that.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "models/model_desc.hpp"
#include "models/model_math.hpp"
#include "models/step_ops.hpp"

using namespace twin;

namespace {

std::vector<const Op*> all_of(const std::vector<Op>& ops, OpKind kind) {
  std::vector<const Op*> found;
  for (const auto& op : ops)
    if (op.kind == kind) found.push_back(&op);
  return found;
}

std::vector<Op> ops_for(const ModelDesc& m, const BatchShape& b, ParallelLayout layout = {}, int stage = 0) {
  std::vector<Op> out;
  step_ops(m, b, layout, Dtype::bf16, Dtype::bf16, stage, out);
  return out;
}

nlohmann::json gpt_oss_config() {
  nlohmann::json j = nlohmann::json::parse(R"({"model_type": "gpt_oss", "hidden_size": 64, "intermediate_size": 64,
    "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 500,
    "max_position_embeddings": 4096, "attention_bias": true, "sliding_window": 8, "num_local_experts": 4,
    "num_experts_per_tok": 2, "experts_per_token": 2, "swiglu_limit": 7.0,
    "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"]})");
  return j;
}

ModelDesc parse(const nlohmann::json& j) { return parse_model_json(j.dump(), "config.json", "m"); }

}  // namespace

TEST_CASE("GPT-OSS: alternating sliding and full layers, sinks, and the published sizes", "[sliding]") {
  for (const auto& [name, layers, experts, total, active] :
       {std::tuple{"gpt-oss-20b", 24, 32, 20.91e9, 3.61e9}, std::tuple{"gpt-oss-120b", 36, 128, 116.83e9, 5.13e9}}) {
    CAPTURE(name);
    const ModelDesc m = resolve_model(name);
    CHECK(m.model_type == "gpt_oss");
    REQUIRE(m.layer_attention.size() == static_cast<std::size_t>(layers));
    CHECK(m.layer_attention[0] == LayerAttention::sliding);
    CHECK(m.layer_attention[1] == LayerAttention::full);
    CHECK(m.layers_of(LayerAttention::sliding) == layers / 2);
    CHECK(m.layers_of(LayerAttention::full) == layers / 2);
    CHECK(m.sliding_window == 128);
    CHECK(m.attention_sinks);
    CHECK(m.num_local_experts == experts);
    // OpenAI's model card: 20.91B total, 3.61B active; 116.83B, 5.13B. Its
    // active count leaves out the embedding table (a lookup, not a GEMM);
    // ours leaves out the experts' biases (0.03%).
    const double vh = 201088.0 * 2880;
    CHECK(std::abs(static_cast<double>(param_count(m)) / total - 1) < 0.005);
    CHECK(std::abs((static_cast<double>(active_param_count(m)) - vh) / active - 1) < 0.01);
    // Every layer caches 8 KV heads of 64 per token...
    CHECK(kv_bytes_per_token(m, Dtype::bf16) == layers * 2 * 8 * 64 * 2);
    // ...but a sliding layer holds only its window: at 128K tokens half the
    // layers hold 128 tokens each.
    const std::int64_t per_layer = 2 * 8 * 64 * 2;
    CHECK(kv_bytes_per_request(m, Dtype::bf16, 131072) == per_layer * (layers / 2) * (131072 + 128));
    CHECK(kv_bytes_per_request(m, Dtype::bf16, 100) == 100 * kv_bytes_per_token(m, Dtype::bf16));
  }
}

TEST_CASE("sliding layers' attention work is capped at the window, full layers' grows with the context", "[sliding]") {
  const ModelDesc m = resolve_model("gpt-oss-20b");
  const double heads = 64, dim = 64;
  for (std::int64_t context : {1000, 100000, 120000}) {
    CAPTURE(context);
    const auto ops = ops_for(m, BatchShape{{{1, context, true}}});
    const auto decode = all_of(ops, OpKind::attn_decode);
    REQUIRE(decode.size() == 2);
    // Full layers first: every cached key.
    CHECK(decode[0]->repeat == 12);
    CHECK(decode[0]->context == context);
    CHECK(decode[0]->flops == 4.0 * static_cast<double>(context + 1) * dim * heads);
    // Sliding layers: the last 127 cached keys and the new one, whatever the context.
    CHECK(decode[1]->repeat == 12);
    CHECK(decode[1]->context == 127);
    CHECK(decode[1]->flops == 4.0 * 128 * dim * heads);
  }
  // A 1,000-token prompt: the first 128 queries see all their keys, the rest 128 each.
  const auto prefill = all_of(ops_for(m, BatchShape{{{1000, 0, true}}}), OpKind::attn_prefill);
  REQUIRE(prefill.size() == 2);
  CHECK(prefill[0]->flops == 4.0 * (1000.0 * 1001 / 2) * dim * heads);
  CHECK(prefill[1]->flops == 4.0 * (128.0 * 129 / 2 + 872.0 * 128) * dim * heads);
  // PP: each stage runs its own layers' kinds (12 layers: 6 and 6).
  const auto stage1 = all_of(ops_for(m, BatchShape{{{1, 5000, true}}}, ParallelLayout{1, 2}, 1), OpKind::attn_decode);
  REQUIRE(stage1.size() == 2);
  CHECK(stage1[0]->repeat == 6);
  CHECK(stage1[1]->repeat == 6);
}

TEST_CASE("chunked local layers see their own chunk only", "[sliding]") {
  // Llama 4's pattern: three chunked layers to one full, chunk 16 here.
  ModelDesc m = resolve_model("llama-3.1-8b");
  m.attention_chunk_size = 16;
  m.layer_attention.assign(static_cast<std::size_t>(m.num_hidden_layers), LayerAttention::chunked);
  for (std::size_t i = 3; i < m.layer_attention.size(); i += 4) m.layer_attention[i] = LayerAttention::full;
  const int64_t local_layers = m.layers_of(LayerAttention::chunked);
  REQUIRE(local_layers > 0);
  // Against a count query by query, for chunks starting anywhere.
  for (std::int64_t c : {0, 5, 15, 16, 17, 40}) {
    for (std::int64_t n : {1, 3, 16, 33}) {
      CAPTURE(c, n);
      std::int64_t pairs = 0;
      for (std::int64_t p = c; p < c + n; ++p) pairs += p - (p / 16) * 16 + 1;
      const StepSums sums = step_sums(m, BatchShape{{{n, c, true}}});
      const AttentionSums& local = (n == 1 && c > 0) ? sums.decode_local : sums.prefill_local;
      const AttentionSums& full = (n == 1 && c > 0) ? sums.decode : sums.prefill;
      CHECK(local.score_pairs == pairs);
      CHECK(local.context == c % 16);
      CHECK(full.score_pairs == n * c + n * (n + 1) / 2);
    }
  }
  // KV held: the current chunk's tokens in the chunked layers.
  const std::int64_t per_layer = kv_bytes_per_token(m, Dtype::bf16) / m.num_hidden_layers;
  CHECK(kv_bytes_per_request(m, Dtype::bf16, 40) ==
        per_layer * (m.layers_of(LayerAttention::full) * 40 + local_layers * 8));
  CHECK(kv_bytes_per_request(m, Dtype::bf16, 32) ==
        per_layer * (m.layers_of(LayerAttention::full) * 32 + local_layers * 16));
}

TEST_CASE("layer_types is read from config.json, and unknown kinds and bad lists name the key", "[sliding]") {
  const ModelDesc m = parse(gpt_oss_config());
  REQUIRE(m.layer_attention.size() == 4);
  CHECK(m.layer_attention[2] == LayerAttention::sliding);
  CHECK(m.layer_attention[3] == LayerAttention::full);
  CHECK(m.sliding_window == 8);
  CHECK(m.attention_sinks);
  // All full (newer transformers write it for every model): no per-layer kinds.
  nlohmann::json llama = nlohmann::json::parse(R"({"hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100, "max_position_embeddings": 64,
    "layer_types": ["full_attention", "full_attention"]})");
  CHECK(parse(llama).layer_attention.empty());
  CHECK_FALSE(parse(llama).attention_sinks);

  const auto rejects = [](const nlohmann::json& j, const std::string& key) {
    CAPTURE(key);
    CHECK_THROWS_WITH(parse(j), Catch::Contains("config.json") && Catch::Contains(key));
  };
  nlohmann::json linear = gpt_oss_config();
  linear["layer_types"][3] = "linear_attention";
  rejects(linear, "layer_types[3]");
  nlohmann::json short_list = gpt_oss_config();
  short_list["layer_types"].erase(0);
  rejects(short_list, "layer_types");
  nlohmann::json no_window = gpt_oss_config();
  no_window.erase("sliding_window");
  rejects(no_window, "sliding_window");
}
