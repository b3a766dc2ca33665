// Qwen3 (dense and MoE) and MiniMax-M2 read from their Hugging Face
// config.json: the bundled Qwen3 descriptors against the published configs
// and parameter totals, the q/k norm they add to a layer (its weights and
// its op), and the layer mixes the registry does not describe, refused by
// name.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "models/model_desc.hpp"
#include "models/model_math.hpp"
#include "models/step_ops.hpp"

using namespace twin;

namespace {

// MiniMaxAI/MiniMax-M2's config.json (its attn_type_list shortened to the
// layers' count of 1s below; the values as published).
// `patch` (", KEY: VALUE, ...") replaces the keys it names: the readers
// refuse a key given twice.
std::string minimax_m2_config(const std::string& patch = "") {
  std::string list;
  for (int i = 0; i < 62; ++i) list += i ? ", 1" : "1";
  const std::string text = R"({
  "architectures": ["MiniMaxM2ForCausalLM"],
  "attn_type_list": [)" + list + R"(],
  "head_dim": 128, "hidden_act": "silu", "hidden_size": 3072, "intermediate_size": 1536,
  "max_position_embeddings": 196608, "model_type": "minimax_m2", "mtp_transformer_layers": 1,
  "num_attention_heads": 48, "num_experts_per_tok": 8, "num_hidden_layers": 62, "num_key_value_heads": 8,
  "num_local_experts": 256, "num_mtp_modules": 3, "qk_norm_type": "per_layer", "rms_norm_eps": 1e-06,
  "rope_theta": 5000000, "rotary_dim": 64, "scoring_func": "sigmoid", "shared_intermediate_size": 0,
  "tie_word_embeddings": false, "use_cache": true, "use_mtp": true, "use_qk_norm": true,
  "use_routing_bias": true, "vocab_size": 200064, "torch_dtype": "bfloat16")" + patch + "}";
  return nlohmann::json::parse(text).dump();  // nlohmann's own parser keeps the last
}

// A config written to a fresh folder's config.json, loaded as a user would.
ModelDesc load_config(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() / ("twin_qwen3_test_" + std::to_string(::getpid())) / name;
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << text;
  ModelDesc m;
  try {
    m = resolve_model(dir.string());
  } catch (...) {
    std::filesystem::remove_all(dir.parent_path());
    throw;
  }
  std::filesystem::remove_all(dir.parent_path());
  return m;
}

std::string load_error(const std::string& name, const std::string& text) {
  try {
    (void)load_config(name, text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Published totals are rounded: within half a unit of their last digit.
void check_billions(const char* what, std::int64_t count, double published, double half_unit) {
  INFO(what << ": " << static_cast<double>(count) / 1e9 << "B against the published " << published << "B");
  CHECK(std::abs(static_cast<double>(count) / 1e9 - published) <= half_unit);
}

const Op* find_op(const std::vector<Op>& ops, OpKind kind) {
  for (const Op& op : ops)
    if (op.kind == kind) return &op;
  return nullptr;
}

}  // namespace

TEST_CASE("the bundled Qwen3 descriptors carry their published config.json values") {
  struct Row {
    const char* name;
    std::int64_t hidden, inter, moe_inter, layers, heads, kv_heads, experts, top_k;
  };
  // Qwen/Qwen3-8B, -32B, -30B-A3B and -235B-A22B config.json; all four:
  // head_dim 128, vocab 151936, 40960 positions, rope_theta 1e6, untied.
  for (const Row& r : {Row{"qwen3-8b", 4096, 12288, 0, 36, 32, 8, 0, 0}, Row{"qwen3-32b", 5120, 25600, 0, 64, 64, 8, 0, 0},
                      Row{"qwen3-30b-a3b", 2048, 6144, 768, 48, 32, 4, 128, 8},
                      Row{"qwen3-235b-a22b", 4096, 12288, 1536, 94, 64, 4, 128, 8}}) {
    CAPTURE(r.name);
    const ModelDesc m = resolve_model(r.name);
    CHECK(m.model_type == (r.experts ? "qwen3_moe" : "qwen3"));
    CHECK(m.hidden_size == r.hidden);
    CHECK(m.intermediate_size == r.inter);
    CHECK(m.moe_intermediate_size == r.moe_inter);
    CHECK(m.num_hidden_layers == r.layers);
    CHECK(m.num_attention_heads == r.heads);
    CHECK(m.num_key_value_heads == r.kv_heads);
    CHECK(m.head_dim == 128);
    CHECK(m.num_local_experts == r.experts);
    CHECK(m.num_experts_per_tok == r.top_k);
    CHECK(m.vocab_size == 151936);
    CHECK(m.max_position_embeddings == 40960);
    CHECK(m.rope_theta == 1e6);
    CHECK_FALSE(m.tie_word_embeddings);
    CHECK_FALSE(m.attention_bias);
    CHECK(m.n_shared_experts == 0);
    CHECK(m.first_k_dense_replace == 0);
    CHECK(m.qk_norm == QkNorm::per_head);
  }
}

TEST_CASE("Qwen3 parameter counts match the published totals, q/k norms included") {
  // Qwen's model cards: 8.2B, 32.8B, 30.5B total / 3.3B active, 235B / 22B.
  check_billions("qwen3-8b", param_count(resolve_model("qwen3-8b")), 8.2, 0.05);
  check_billions("qwen3-32b", param_count(resolve_model("qwen3-32b")), 32.8, 0.05);
  const ModelDesc a3b = resolve_model("qwen3-30b-a3b");
  check_billions("qwen3-30b-a3b", param_count(a3b), 30.5, 0.05);
  // 3.35B by count: the card's "3.3B activated" is cut, not rounded (2%).
  check_billions("qwen3-30b-a3b active", active_param_count(a3b), 3.3, 0.066);
  const ModelDesc a22b = resolve_model("qwen3-235b-a22b");
  check_billions("qwen3-235b-a22b", param_count(a22b), 235, 0.5);
  check_billions("qwen3-235b-a22b active", active_param_count(a22b), 22, 0.5);
  // The norms: q_norm and k_norm of head_dim per layer, replicated under TP.
  ModelDesc plain = resolve_model("qwen3-8b");
  plain.qk_norm = QkNorm::none;
  CHECK(param_count(resolve_model("qwen3-8b")) - param_count(plain) == 36 * 2 * 128);
  CHECK(weight_bytes_per_gpu(resolve_model("qwen3-8b"), Dtype::bf16, {2, 1}, 0) -
            weight_bytes_per_gpu(plain, Dtype::bf16, {2, 1}, 0) ==
        36 * 2 * 128 * 2);
}

TEST_CASE("the q/k norm is one op per layer after the QKV projection, in place over the GPU's Q and K") {
  const ModelDesc m = resolve_model("qwen3-8b");
  std::vector<Op> ops;
  step_ops(m, BatchShape{{{16, 0, true}}}, ParallelLayout{2, 1}, Dtype::bf16, Dtype::bf16, 0, ops);
  const Op* norm = find_op(ops, OpKind::qk_norm);
  REQUIRE(norm);
  CHECK(norm->repeat == 36);
  CHECK(norm->tokens == 16);
  CHECK(norm->n == (16 + 4) * 128);    // 32 q heads and 8 kv heads over 2 GPUs
  CHECK(norm->num_seqs == 16 + 4);     // one RMS per head
  CHECK(norm->bytes == 16.0 * 20 * 128 * 2 * 2 + 2 * 128 * 2);  // read + write bf16, two weight vectors
  // Per head: no collective of its own; the layer's two all-reduces only.
  std::int64_t allreduce_ops = 0;
  for (const Op& op : ops) allreduce_ops += op.kind == OpKind::tp_allreduce ? 1 : 0;
  CHECK(allreduce_ops == 1);
  ModelDesc plain = m;
  plain.qk_norm = QkNorm::none;
  std::vector<Op> plain_ops;
  step_ops(plain, BatchShape{{{16, 0, true}}}, ParallelLayout{2, 1}, Dtype::bf16, Dtype::bf16, 0, plain_ops);
  CHECK(plain_ops.size() + 1 == ops.size());
  CHECK_FALSE(find_op(plain_ops, OpKind::qk_norm));
}

TEST_CASE("a Qwen3-MoE config.json reads num_experts and the experts' own width") {
  const ModelDesc m = load_config("Qwen3-30B-A3B", R"({"architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false,
    "decoder_sparse_step": 1, "head_dim": 128, "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 6144,
    "max_position_embeddings": 40960, "max_window_layers": 48, "mlp_only_layers": [], "model_type": "qwen3_moe",
    "moe_intermediate_size": 768, "norm_topk_prob": true, "num_attention_heads": 32, "num_experts": 128,
    "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
    "rope_scaling": null, "rope_theta": 1000000.0, "sliding_window": null, "tie_word_embeddings": false,
    "torch_dtype": "bfloat16", "use_sliding_window": false, "vocab_size": 151936})");
  CHECK(m.name == "Qwen3-30B-A3B");
  CHECK(m.num_local_experts == 128);
  CHECK(m.expert_intermediate_size() == 768);
  CHECK(m.qk_norm == QkNorm::per_head);
  CHECK(param_count(m) == param_count(resolve_model("qwen3-30b-a3b")));
}

TEST_CASE("MiniMax-M2's config.json: 256 experts of 1536, top 8, a per-layer q/k norm") {
  const ModelDesc m = load_config("MiniMax-M2", minimax_m2_config());
  CHECK(m.model_type == "minimax_m2");
  CHECK(m.num_local_experts == 256);
  CHECK(m.num_experts_per_tok == 8);
  CHECK(m.expert_intermediate_size() == 1536);
  CHECK(m.qk_norm == QkNorm::per_layer);
  CHECK(m.q_dim() == 6144);
  // MiniMax's model card: 230B total, 10B active (without the embeddings:
  // the 200k-token vocabulary adds 1.2B).
  check_billions("minimax-m2", param_count(m), 230, 2.0);
  const std::int64_t embeddings = 2 * m.vocab_size * m.hidden_size;
  check_billions("minimax-m2 active", active_param_count(m) - embeddings, 10, 0.5);
  // Per layer: a weight per Q and K value, sharded over TP with the heads;
  // the sums of squares all-reduced (fp32, two per token) under TP.
  ModelDesc plain = m;
  plain.qk_norm = QkNorm::none;
  CHECK(param_count(m) - param_count(plain) == 62 * (6144 + 1024));
  std::vector<Op> ops;
  step_ops(m, BatchShape{{{16, 0, true}}}, ParallelLayout{4, 1}, Dtype::bf16, Dtype::bf16, 0, ops);
  const Op* norm = find_op(ops, OpKind::qk_norm);
  REQUIRE(norm);
  CHECK(norm->n == (12 + 2) * 128);
  CHECK(norm->num_seqs == 2);
  std::int64_t sums = 0;
  for (const Op& op : ops)
    if (op.kind == OpKind::tp_allreduce && op.comm_bytes == 16.0 * 2 * 4) sums += op.repeat;
  CHECK(sums == 62);
}

TEST_CASE("layer mixes the registry does not describe are refused naming the key") {
  const std::string qwen_moe = R"({"model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 128,
    "moe_intermediate_size": 32, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 16, "vocab_size": 256, "max_position_embeddings": 512, "num_experts": 8, "num_experts_per_tok": 2)";
  CHECK_NOTHROW(load_config("ok", qwen_moe + "}"));
  CHECK_THAT(load_error("sparse", qwen_moe + R"(, "decoder_sparse_step": 2})"), Catch::Contains("'decoder_sparse_step'"));
  CHECK_THAT(load_error("dense", qwen_moe + R"(, "mlp_only_layers": [0]})"), Catch::Contains("'mlp_only_layers'"));
  CHECK_THAT(load_error("window", qwen_moe + R"(, "use_sliding_window": true})"), Catch::Contains("'use_sliding_window'"));
  CHECK_THAT(load_error("lightning", minimax_m2_config(R"(, "attn_type_list": [0, 1])")),
             Catch::Contains("'attn_type_list[0]'"));
  CHECK_THAT(load_error("shared", minimax_m2_config(R"(, "shared_intermediate_size": 512)")),
             Catch::Contains("'shared_intermediate_size'"));
  CHECK_THAT(load_error("norm", minimax_m2_config(R"(, "qk_norm_type": "per_group")")),
             Catch::Contains("'qk_norm_type'"));
  CHECK(load_config("no_norm", minimax_m2_config(R"(, "use_qk_norm": false)")).qk_norm == QkNorm::none);
  CHECK_THAT(load_error("type", R"({"model_type": "jamba", "hidden_size": 64})"),
             Catch::Contains("qwen3, qwen3_moe, minimax_m2"));
}
