// The 2026 hybrid families (issue 41): Gemma 3, Llama 4, Qwen3-Next and
// Nemotron-H read from their config.json; parameter counts against the
// published figures; KV bytes per token (attention layers only) and the
// fixed state per request exact against the configs' arithmetic; the state
// scans' cost flat in the context.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "models/hybrid_layers.hpp"
#include "models/model_desc.hpp"
#include "models/model_math.hpp"
#include "models/step_ops.hpp"

using namespace twin;

namespace {

ModelDesc parse(const nlohmann::json& j) { return parse_model_json(j.dump(), "test config", "m"); }

std::vector<Op> ops_for(const ModelDesc& m, const BatchShape& b, ParallelLayout layout = {}) {
  std::vector<Op> out;
  step_ops(m, b, layout, Dtype::bf16, Dtype::bf16, 0, out);
  return out;
}

std::vector<Op> kind_of(const std::vector<Op>& ops, OpKind kind) {
  std::vector<Op> found;
  for (const Op& op : ops)
    if (op.kind == kind) found.push_back(op);
  return found;
}

BatchShape decodes(int n, int64_t context) {
  BatchShape b;
  for (int i = 0; i < n; ++i) b.seqs.push_back(SeqShape{1, context, true});
  return b;
}

// Llama 4's vision encoder and projector, which the published totals
// include and the text model does not: the vision_config of both
// checkpoints (34 layers of 1408 with biases, MLP 5632, 14x14 patches of a
// 336 image plus a class token, the pixel-shuffle adapter's MLP 5632 ->
// 4096 -> 4096, and the projector 4096 -> 5120).
double llama4_vision_params() {
  const double h = 1408, inter = 5632, layers = 34, positions = (336.0 / 14) * (336.0 / 14) + 1;
  const double layer = 4 * (h * h + h) + (h * inter + inter) + (inter * h + h) + 4 * h;
  return layers * layer + 3 * 14 * 14 * h + positions * h + h + 4 * h + 5632.0 * 4096 + 4096.0 * 4096 + 4096.0 * 5120;
}

}  // namespace

TEST_CASE("hybrid descriptors' parameter counts are within 1% of the published figures") {
  struct Row {
    const char* name;
    double published;  // billions
    double not_modelled;  // parameters the published figure includes that the text model does not
    const char* source;
  };
  const Row rows[] = {
      // Gemma 3 technical report (arXiv 2503.19786), Table 1: 1,416M embedding + 25,600M non-embedding (the 417M vision encoder apart).
      {"gemma-3-27b", 27.016, 0, "Gemma 3 technical report, Table 1"},
      // Meta's model cards: 109B and 400B total, with the vision encoder.
      {"llama-4-scout", 109.0, llama4_vision_params(), "Llama 4 model card: 17B active, 109B total"},
      {"llama-4-maverick", 400.0, llama4_vision_params(), "Llama 4 model card: 17B active, 400B total"},
      // Qwen's model card: 80B parameters, 3B activated.
      {"qwen3-next-80b-a3b", 80.0, 0, "Qwen3-Next-80B-A3B model card"},
      // The checkpoint's safetensors: 8,100,852,736 parameters.
      {"nemotron-h-8b", 8.100852736, 0, "Nemotron-H-8B-Base-8K safetensors"},
  };
  for (const Row& r : rows) {
    INFO(r.name << " against " << r.source);
    const double got = (static_cast<double>(param_count(resolve_model(r.name))) + r.not_modelled) / 1e9;
    INFO("got " << got << "B");
    CHECK(std::abs(got - r.published) / r.published < 0.01);
  }
  // Active: Llama 4's 17B (one routed and one shared expert a token), Qwen3-Next's 3B.
  CHECK(std::abs(static_cast<double>(active_param_count(resolve_model("llama-4-scout"))) / 1e9 - 17.0) / 17.0 < 0.02);
  CHECK(std::abs(static_cast<double>(active_param_count(resolve_model("llama-4-maverick"))) / 1e9 - 17.0) / 17.0 < 0.02);
  // Qwen's "3B activated" is rounded: without the embedding and LM head
  // (2 x 151936 x 2048) ten routed experts and the shared one give 3.25B.
  const ModelDesc qn = resolve_model("qwen3-next-80b-a3b");
  const double qn_active = static_cast<double>(active_param_count(qn) - 2 * qn.vocab_size * qn.hidden_size) / 1e9;
  CHECK(qn_active >= 3.0);
  CHECK(qn_active < 3.5);
}

TEST_CASE("KV bytes per token count the attention layers, the state is per request") {
  // Gemma 3: 62 layers x K and V x 16 heads x 128 x 2 bytes.
  CHECK(kv_bytes_per_token(resolve_model("gemma-3-27b"), Dtype::bf16) == 62 * 2 * 16 * 128 * 2);
  CHECK(kv_bytes_per_token(resolve_model("llama-4-scout"), Dtype::bf16) == 48 * 2 * 8 * 128 * 2);
  // Qwen3-Next: the 12 full-attention layers of 48 only (2 KV heads of 256).
  const ModelDesc qn = resolve_model("qwen3-next-80b-a3b");
  CHECK(kv_bytes_per_token(qn, Dtype::bf16) == 12 * 2 * 2 * 256 * 2);
  // Its 36 Gated DeltaNet layers: 32 value heads x 128 x 128 of state and
  // a 3-step window of the convolution over 2 x 2048 + 4096 channels.
  CHECK(state_bytes_per_request(qn, Dtype::bf16) == 36 * (32 * 128 * 128 + 3 * (2 * 2048 + 4096)) * 2);
  // Nemotron-H-8B: 4 attention layers; 24 Mamba-2 layers of 128 heads x 64
  // x 128 of state and a 3-step window over 8192 + 2 x 8 x 128 channels.
  const ModelDesc nh = resolve_model("nemotron-h-8b");
  CHECK(kv_bytes_per_token(nh, Dtype::bf16) == 4 * 2 * 8 * 128 * 2);
  CHECK(state_bytes_per_request(nh, Dtype::bf16) == 24 * (128 * 64 * 128 + 3 * (8192 + 2 * 8 * 128)) * 2);
  // Under TP the state splits with the heads (the groups too where TP divides them).
  CHECK(state_bytes_per_request_per_gpu(nh, Dtype::bf16, ParallelLayout{4, 1}, 0) ==
        state_bytes_per_request(nh, Dtype::bf16) / 4);
  CHECK(state_bytes_per_request(resolve_model("llama-3.1-8b"), Dtype::bf16) == 0);
  // A request's KV: the local layers bounded by the window or chunk.
  const ModelDesc scout = resolve_model("llama-4-scout");
  const int64_t per_layer = 2 * 8 * 128 * 2;
  CHECK(kv_bytes_per_request(scout, Dtype::bf16, 100000) ==
        per_layer * (12 * 100000 + 36 * ((100000 - 1) % 8192 + 1)));
}

TEST_CASE("hybrid configs read their layer patterns") {
  const ModelDesc gemma = resolve_model("gemma-3-27b");
  REQUIRE(gemma.layer_attention.size() == 62u);
  CHECK(gemma.layers_of(LayerAttention::full) == 10);  // layers 6, 12, ..., 60
  CHECK(gemma.layer_attention[5] == LayerAttention::full);
  CHECK(gemma.layer_attention[0] == LayerAttention::sliding);
  CHECK(gemma.qk_norm == QkNorm::per_head);
  const ModelDesc mav = resolve_model("llama-4-maverick");
  CHECK(mav.layers_of(LayerAttention::chunked) == 36);
  CHECK(mav.layer_attention[3] == LayerAttention::full);
  CHECK(mlp_of(mav, 0) == LayerMlp::dense);
  CHECK(mlp_of(mav, 1) == LayerMlp::moe);
  CHECK(mav.intermediate_size == 16384);
  CHECK(mav.expert_intermediate_size() == 8192);
  const ModelDesc qn = resolve_model("qwen3-next-80b-a3b");
  CHECK(qn.layers_of(LayerAttention::linear) == 36);
  CHECK(qn.layer_attention[3] == LayerAttention::full);
  CHECK(qn.n_shared_experts == 1);
  CHECK(qn.attn_output_gate);
  const ModelDesc nh = resolve_model("nemotron-h-8b");
  const LayerCounts c = count_layers(nh, 0, nh.num_hidden_layers);
  CHECK(c.mamba == 24);
  CHECK(c.full == 4);
  CHECK(c.no_mixer == 24);
  CHECK(c.dense == 24);
  CHECK(c.no_mlp == 28);
  CHECK_FALSE(nh.mlp_gated);
}

TEST_CASE("a multimodal Gemma 3 or Llama 4 config is read from its text_config") {
  // google/gemma-3-27b-it's config.json: the text model's keys that differ
  // from Gemma3TextConfig's defaults only.
  const auto gemma = nlohmann::json::parse(R"({"architectures": ["Gemma3ForConditionalGeneration"],
    "model_type": "gemma3", "torch_dtype": "bfloat16", "text_config": {"head_dim": 128, "hidden_size": 5376,
    "intermediate_size": 21504, "model_type": "gemma3_text", "num_attention_heads": 32, "num_hidden_layers": 62,
    "num_key_value_heads": 16, "query_pre_attn_scalar": 168, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
    "sliding_window": 1024}, "vision_config": {"hidden_size": 1152}})");
  const ModelDesc g = parse(gemma);
  CHECK(param_count(g) == param_count(resolve_model("gemma-3-27b")));
  CHECK(g.layer_attention == resolve_model("gemma-3-27b").layer_attention);
  CHECK(g.tie_word_embeddings);
  const auto llama4 = nlohmann::json::parse(R"({"model_type": "llama4", "text_config": {"model_type": "llama4_text",
    "hidden_size": 5120, "intermediate_size": 8192, "intermediate_size_mlp": 16384, "num_hidden_layers": 48,
    "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 202048,
    "max_position_embeddings": 1048576, "num_local_experts": 128, "num_experts_per_tok": 1,
    "interleave_moe_layer_step": 2, "attention_chunk_size": 8192,
    "no_rope_layers": [1,1,1,0,1,1,1,0,1,1,1,0,1,1,1,0,1,1,1,0,1,1,1,0,1,1,1,0,1,1,1,0,1,1,1,0,1,1,1,0,1,1,1,0,1,1,1,0]}})");
  const ModelDesc l = parse(llama4);
  CHECK(param_count(l) == param_count(resolve_model("llama-4-maverick")));
  CHECK(l.layer_attention == resolve_model("llama-4-maverick").layer_attention);
}

TEST_CASE("hybrid configs refuse what they do not model, by name") {
  CHECK_THROWS_WITH(parse(nlohmann::json{{"model_type", "jamba"}}),
                    Catch::Contains("unsupported 'jamba'") && Catch::Contains("qwen3_next") &&
                        Catch::Contains("nemotron_h"));
  nlohmann::json j = nlohmann::json::parse(R"({"model_type": "nemotron_h", "hidden_size": 64, "intermediate_size": 128,
    "hybrid_override_pattern": "M*E-", "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "mamba_num_heads": 4, "mamba_head_dim": 16, "ssm_state_size": 16, "n_groups": 2, "conv_kernel": 4})");
  CHECK_THROWS_WITH(parse(j), Catch::Contains("hybrid_override_pattern[2]") && Catch::Contains("MoE"));
  j["hybrid_override_pattern"] = "M*--";
  j.erase("ssm_state_size");
  CHECK_THROWS_WITH(parse(j), Catch::Contains("ssm_state_size"));
  // Linear attention is read for Qwen3-Next only.
  nlohmann::json llama = nlohmann::json::parse(R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100, "max_position_embeddings": 64,
    "layer_types": ["linear_attention", "full_attention"]})");
  CHECK_THROWS_WITH(parse(llama), Catch::Contains("layer_types[0]") && Catch::Contains("qwen3_next"));
  // A Qwen3-Next config without its linear layers' shapes.
  nlohmann::json qn = nlohmann::json::parse(R"({"model_type": "qwen3_next", "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 100,
    "max_position_embeddings": 64, "full_attention_interval": 4, "num_experts": 4, "num_experts_per_tok": 2,
    "moe_intermediate_size": 32, "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
    "linear_value_head_dim": 16})");
  CHECK_THROWS_WITH(parse(qn), Catch::Contains("linear_conv_kernel_dim"));
  qn["linear_conv_kernel_dim"] = 4;
  CHECK(parse(qn).layers_of(LayerAttention::linear) == 3);
  // TP must divide the mixers' heads.
  CHECK_THROWS_WITH(check_layout(parse(qn), ParallelLayout{4, 1}), Catch::Contains("linear_num_key_heads"));
}

TEST_CASE("state scans cost the same at any context while attention grows with it") {
  for (const char* name : {"qwen3-next-80b-a3b", "nemotron-h-8b"}) {
    CAPTURE(name);
    const ModelDesc m = resolve_model(name);
    const auto short_ctx = ops_for(m, decodes(8, 1024));
    const auto long_ctx = ops_for(m, decodes(8, 65536));
    const auto scan_short = kind_of(short_ctx, OpKind::state_scan), scan_long = kind_of(long_ctx, OpKind::state_scan);
    REQUIRE(scan_short.size() == 1u);
    REQUIRE(scan_long.size() == 1u);
    CHECK(scan_short[0].bytes == scan_long[0].bytes);
    CHECK(scan_short[0].flops == scan_long[0].flops);
    CHECK(scan_short[0].context == 0);
    // A decode reads and writes each request's state once per layer.
    const MixerShape s = mixer_shape(m, m.layers_of(LayerAttention::linear) > 0 ? LayerAttention::linear
                                                                               : LayerAttention::mamba, 1);
    CHECK(scan_short[0].bytes >= 8.0 * 2 * static_cast<double>(s.state_elems()) * 2);
    CHECK(scan_short[0].repeat == m.layers_of(LayerAttention::linear) + m.layers_of(LayerAttention::mamba));
    const auto att_short = kind_of(short_ctx, OpKind::attn_decode), att_long = kind_of(long_ctx, OpKind::attn_decode);
    REQUIRE(att_short.size() == 1u);
    CHECK(att_long[0].bytes > 32 * att_short[0].bytes);
    CHECK(att_short[0].repeat == m.layers_of(LayerAttention::full));
    // Prefill: the chunked scan grows with the new tokens, not their square.
    const auto p1 = kind_of(ops_for(m, BatchShape{{{4096, 0, true}}}), OpKind::state_scan);
    const auto p2 = kind_of(ops_for(m, BatchShape{{{8192, 0, true}}}), OpKind::state_scan);
    REQUIRE(p1.size() == 1u);
    CHECK(p2[0].flops / p1[0].flops == Approx(2.0).epsilon(0.01));
  }
}

TEST_CASE("hybrid layers' projections take their own shapes") {
  const ModelDesc nh = resolve_model("nemotron-h-8b");
  const auto ops = ops_for(nh, decodes(4, 100));
  const auto qkv = kind_of(ops, OpKind::qkv_proj);
  REQUIRE(qkv.size() == 2u);  // the Mamba layers' in_proj, the attention layers' QKV
  CHECK(qkv[0].n == 2 * 8192 + 2 * 8 * 128 + 128);
  CHECK(qkv[0].repeat == 24);
  CHECK(qkv[1].n == 4096 + 2 * 1024);
  CHECK(qkv[1].repeat == 4);
  const auto up = kind_of(ops, OpKind::gate_up_proj);
  REQUIRE(up.size() == 1u);
  CHECK(up[0].n == 21504);  // relu2: no gate
  CHECK(up[0].repeat == 24);
  // The weights the ops read add up to the model's (one decode step).
  double weight_reads = 0;
  for (const Op& op : ops)
    if (op.kind == OpKind::qkv_proj || op.kind == OpKind::o_proj || op.kind == OpKind::gate_up_proj ||
        op.kind == OpKind::down_proj)
      weight_reads += static_cast<double>(op.n) * static_cast<double>(op.k) * op.repeat;
  const double layers_linear = 24.0 * (18560.0 * 4096 + 8192.0 * 4096) + 4 * (6144.0 * 4096 + 4096.0 * 4096) +
                               24 * 2 * 21504.0 * 4096;
  CHECK(weight_reads == Approx(layers_linear));
}

TEST_CASE("a GLM-4.5 config (glm4_moe) reads as DeepSeek-style MoE with QKV biases") {
  // zai-org/GLM-4.5's config.json values (the MTP layer, num_nextn_predict_layers, is not loaded for the target).
  const auto glm = nlohmann::json::parse(R"({"model_type": "glm4_moe", "hidden_size": 5120, "intermediate_size": 12288,
    "moe_intermediate_size": 1536, "num_hidden_layers": 92, "num_attention_heads": 96, "num_key_value_heads": 8,
    "head_dim": 128, "n_routed_experts": 160, "n_shared_experts": 1, "num_experts_per_tok": 8,
    "first_k_dense_replace": 3, "vocab_size": 151552, "max_position_embeddings": 131072, "attention_bias": true,
    "use_qk_norm": false, "partial_rotary_factor": 0.5, "num_nextn_predict_layers": 1, "rope_theta": 1000000,
    "tie_word_embeddings": false})");
  const ModelDesc m = parse(glm);
  CHECK(m.attention_bias);
  CHECK(m.qk_norm == QkNorm::none);
  CHECK(count_layers(m, 0, m.num_hidden_layers).dense == 3);
  // Z.ai's model card: 355B total (with the 1-layer MTP module, about 4B, not counted here), 32B active.
  CHECK(std::abs(static_cast<double>(param_count(m)) / 1e9 - 355.0) / 355.0 < 0.01);
  // Active as the card counts it, without the embedding and LM head: 32.08B.
  const double active = static_cast<double>(active_param_count(m) - 2 * m.vocab_size * m.hidden_size) / 1e9;
  CHECK(std::abs(active - 32.0) / 32.0 < 0.01);
  nlohmann::json qk = glm;
  qk["use_qk_norm"] = true;
  CHECK(parse(qk).qk_norm == QkNorm::per_head);
}
