// twinserve models list | show NAME [--json]
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <string>

#include "models/model_desc.hpp"
#include "models/hybrid_layers.hpp"
#include "models/model_math.hpp"
#include "tools/twinserve/command_registry.hpp"
#include "tools/twinserve/flag_registry.hpp"

namespace {

using namespace twin;

std::string billions(int64_t n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fB", static_cast<double>(n) / 1e9);
  if (n < 1'000'000'000) std::snprintf(buf, sizeof buf, "%.2fM", static_cast<double>(n) / 1e6);
  return buf;
}

std::string gib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  return buf;
}

void list_models() {
  std::printf("%-16s %-11s %9s %9s %6s %6s %6s %4s %8s\n", "name", "type", "params", "active",
              "layers", "hidden", "heads", "kv", "context");
  for (const auto& name : model_names()) {
    auto m = resolve_model(name);
    std::printf("%-16s %-11s %9s %9s %6lld %6lld %6lld %4lld %8lld\n", name.c_str(), m.model_type.c_str(),
                billions(param_count(m)).c_str(), billions(active_param_count(m)).c_str(),
                static_cast<long long>(m.num_hidden_layers), static_cast<long long>(m.hidden_size),
                static_cast<long long>(m.num_attention_heads), static_cast<long long>(m.num_key_value_heads),
                static_cast<long long>(m.max_position_embeddings));
  }
}

nlohmann::ordered_json model_json(const ModelDesc& m) {
  nlohmann::ordered_json j;
  j["name"] = m.name;
  j["model_type"] = m.model_type;
  j["num_parameters"] = param_count(m);
  j["num_active_parameters"] = active_param_count(m);
  j["num_hidden_layers"] = m.num_hidden_layers;
  j["hidden_size"] = m.hidden_size;
  j["intermediate_size"] = m.intermediate_size;
  j["num_attention_heads"] = m.num_attention_heads;
  j["num_key_value_heads"] = m.num_key_value_heads;
  j["head_dim"] = m.head_dim;
  j["vocab_size"] = m.vocab_size;
  j["max_position_embeddings"] = m.max_position_embeddings;
  j["num_local_experts"] = m.num_local_experts;
  j["num_experts_per_tok"] = m.num_experts_per_tok;
  // DeepSeek-style MoE only: other models' JSON stays as it was.
  if (m.moe_intermediate_size > 0) j["moe_intermediate_size"] = m.moe_intermediate_size;
  if (m.n_shared_experts > 0) j["n_shared_experts"] = m.n_shared_experts;
  if (m.first_k_dense_replace > 0) j["first_k_dense_replace"] = m.first_k_dense_replace;
  // Attention kinds beyond GQA only: other models' JSON stays as it was.
  if (m.is_mla()) {
    j["kv_lora_rank"] = m.kv_lora_rank;
    j["q_lora_rank"] = m.q_lora_rank;
    j["qk_nope_head_dim"] = m.qk_nope_head_dim;
    j["qk_rope_head_dim"] = m.qk_rope_head_dim;
    j["v_head_dim"] = m.v_head_dim;
  }
  if (!m.layer_attention.empty()) {
    auto& kinds = j["layer_attention"];
    kinds = nlohmann::ordered_json::array();
    for (LayerAttention a : m.layer_attention) kinds.push_back(layer_attention_name(a));
    j["sliding_window"] = m.sliding_window;
    if (m.attention_chunk_size > 0) j["attention_chunk_size"] = m.attention_chunk_size;
  }
  if (m.attention_sinks) j["attention_sinks"] = true;
  // Hybrid models only (issue 41): per-layer MLPs and the fixed state per request.
  if (!m.layer_mlp.empty()) {
    auto& mlps = j["layer_mlp"];
    mlps = nlohmann::ordered_json::array();
    for (LayerMlp k : m.layer_mlp) mlps.push_back(layer_mlp_name(k));
  }
  if (state_bytes_per_request(m, Dtype::bf16) > 0) j["state_bytes_per_request_bf16"] = state_bytes_per_request(m, Dtype::bf16);
  j["attention_bias"] = m.attention_bias;
  j["qk_norm"] = qk_norm_name(m.qk_norm);
  j["tie_word_embeddings"] = m.tie_word_embeddings;
  j["rms_norm_eps"] = m.rms_norm_eps;
  j["rope_theta"] = m.rope_theta;
  j["torch_dtype"] = std::string(dtype_name(m.torch_dtype));
  auto& kv = j["kv_bytes_per_token"];
  auto& w = j["weight_bytes"];
  for (Dtype d : kAllDtypes) {
    kv[std::string(dtype_name(d))] = kv_bytes_per_token(m, d);
    w[std::string(dtype_name(d))] = weight_bytes(m, d);
  }
  return j;
}

void line(const char* key, const std::string& value) { std::printf("%-24s %s\n", key, value.c_str()); }
std::string num(int64_t v) { return std::to_string(v); }

void show_sizes(const ModelDesc& m) {
  line("parameters", billions(param_count(m)) + " (" + num(param_count(m)) + ")");
  line("active parameters", billions(active_param_count(m)) + " (" + num(active_param_count(m)) + ")");
  line("layers", num(m.num_hidden_layers));
  line("hidden size", num(m.hidden_size));
  if (m.is_moe() && m.first_k_dense_replace > 0) {
    line("intermediate size", num(m.intermediate_size) + " (dense layers), " + num(m.expert_intermediate_size()) +
                                  " per expert");
  } else if (m.is_moe() && m.moe_intermediate_size > 0) {
    // Qwen3-MoE: every layer sparse; its config's dense width is unused.
    line("intermediate size", num(m.expert_intermediate_size()) + " per expert (no dense layers)");
  } else {
    line("intermediate size", num(m.intermediate_size) + (m.is_moe() ? " per expert" : ""));
  }
}

// The layers by attention kind ("32 full, 16 sliding (window 4096), ...").
std::string layer_kinds(const ModelDesc& m) {
  std::string kinds = num(m.layers_of(LayerAttention::full)) + " full";
  if (m.layers_of(LayerAttention::sliding) > 0)
    kinds += ", " + num(m.layers_of(LayerAttention::sliding)) + " sliding (window " + num(m.sliding_window) + ")";
  if (m.layers_of(LayerAttention::chunked) > 0)
    kinds += ", " + num(m.layers_of(LayerAttention::chunked)) + " chunked (chunk " + num(m.attention_chunk_size) + ")";
  if (m.layers_of(LayerAttention::linear) > 0)
    kinds += ", " + num(m.layers_of(LayerAttention::linear)) + " linear (Gated DeltaNet, " +
             num(m.linear_num_value_heads) + " value heads of " + num(m.linear_key_head_dim) + "x" +
             num(m.linear_value_head_dim) + ")";
  if (m.layers_of(LayerAttention::mamba) > 0)
    kinds += ", " + num(m.layers_of(LayerAttention::mamba)) + " mamba (Mamba-2, " + num(m.mamba_num_heads) +
             " heads of " + num(m.mamba_head_dim) + "x" + num(m.ssm_state_size) + ")";
  if (m.layers_of(LayerAttention::none) > 0) kinds += ", " + num(m.layers_of(LayerAttention::none)) + " MLP-only";
  return kinds;
}

void show_attention(const ModelDesc& m) {
  line("attention heads", num(m.num_attention_heads));
  if (m.is_mla()) {
    line("attention", "multi-head latent: cache " + num(m.kv_lora_rank) + " latent + " + num(m.qk_rope_head_dim) +
                          " rotary key per token and layer");
    line("latent ranks", "kv " + num(m.kv_lora_rank) + ", q " + (m.q_lora_rank > 0 ? num(m.q_lora_rank) : "none"));
    line("head dims", "q/k " + num(m.qk_nope_head_dim) + " + " + num(m.qk_rope_head_dim) + " rotary, v " +
                          num(m.v_head_dim));
  } else {
    line("KV heads", num(m.num_key_value_heads));
    line("head dim", num(m.head_dim));
  }
  if (!m.layer_attention.empty()) {
    line("attention layers", layer_kinds(m));
    if (state_bytes_per_request(m, Dtype::bf16) > 0)
      line("state per request", num(state_bytes_per_request(m, Dtype::bf16)) + " bytes in bf16 (fixed, any length)");
  } else if (m.sliding_window > 0) {
    line("attention layers", "all sliding (window " + num(m.sliding_window) + ")");
  }
  if (m.attention_sinks) line("attention sinks", "yes (a learned logit per head)");
}

void show_features(const ModelDesc& m) {
  line("vocab size", num(m.vocab_size));
  line("max context", num(m.max_position_embeddings));
  line("experts", m.is_moe() ? num(m.num_local_experts) + " (top " + num(m.num_experts_per_tok) + ")" +
                                   (m.n_shared_experts > 0 ? " + " + num(m.n_shared_experts) + " shared" : "") +
                                   (m.first_k_dense_replace > 0 ? ", first " + num(m.first_k_dense_replace) +
                                                                      " layers dense"
                                                                : "")
                              : "none (dense)");
  line("QKV bias", m.attention_bias ? "yes" : "no");
  line("q/k norm", m.qk_norm == QkNorm::per_head    ? "per head (Qwen3)"
                   : m.qk_norm == QkNorm::per_layer ? "per layer (MiniMax-M2)"
                                                    : "no");
  line("tied embeddings", m.tie_word_embeddings ? "yes" : "no");
  line("published dtype", std::string(dtype_name(m.torch_dtype)));
}

void show_bytes(const ModelDesc& m) {
  std::printf("\n%-6s %18s %14s\n", "dtype", "KV bytes/token", "weights");
  for (Dtype d : kAllDtypes)
    std::printf("%-6s %18lld %14s\n", std::string(dtype_name(d)).c_str(),
                static_cast<long long>(kv_bytes_per_token(m, d)), gib(weight_bytes(m, d)).c_str());
  if (!m.layer_attention.empty() && kv_bytes_per_token(m, Dtype::bf16) > 0) {
    // What vLLM's hybrid KV cache manager holds; the memory plan counts
    // every layer per token (docs/models.md).
    std::printf("\nKV bytes per request, bf16, each layer holding only what it reads (vLLM's hybrid manager):\n");
    for (int64_t tokens : {1024LL, 8192LL, 32768LL, 131072LL})
      std::printf("  %7lld tokens %16lld  (%.1f%% of every layer's)\n", static_cast<long long>(tokens),
                  static_cast<long long>(kv_bytes_per_request(m, Dtype::bf16, tokens)),
                  100.0 * static_cast<double>(kv_bytes_per_request(m, Dtype::bf16, tokens)) /
                      static_cast<double>(tokens * kv_bytes_per_token(m, Dtype::bf16)));
  }
}

void show_model(const std::string& name, bool json) {
  const ModelDesc m = resolve_model(name);
  if (json) {
    std::cout << model_json(m).dump(2) << "\n";
    return;
  }
  line("name", m.name);
  line("model_type", m.model_type);
  show_sizes(m);
  show_attention(m);
  show_features(m);
  show_bytes(m);
}

twin::cli::RegisterCommand reg{"models", [](CLI::App& root) {
  auto* models = root.add_subcommand("models", "Bundled model descriptors and their sizes");
  models->require_subcommand(1);
  models->add_subcommand("list", "List the bundled models")->callback([] { list_models(); });
  auto* show = models->add_subcommand(
      "show", "Show one model: parameters, shape, KV bytes per token and weight bytes per dtype");
  auto name = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  show->add_option("name", *name, "A bundled model name, or the path of a Hugging Face config.json")->required();
  twin::cli::add_switch(*show, twin::cli::FlagId::json, *json, "snake_case keys");
  show->callback([name, json] { show_model(*name, *json); });
}};

}  // namespace
