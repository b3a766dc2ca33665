#include "engine/runtime/model_config.hpp"

#include "base/error.hpp"
#include "models/model_desc.hpp"

namespace twin {

namespace {

// Model types and layer kinds the simulator prices and the engine does not
// run: refused by name, never run as what they resemble.
void refuse_layer_kinds(const ModelDesc& d) {
  // Qwen3-MoE's experts are narrower than its dense width and renormalised
  // as norm_topk_prob says; MiniMax-M2 routes by sigmoid scores with a
  // bias, normalises Q and K over the whole layer and rotates part of each
  // head.
  if (d.model_type == "qwen3_moe" || d.model_type == "minimax_m2") {
    throw Error("model '" + excerpt(d.name, 80) + "': model_type " + d.model_type +
                " is priced by the simulator only; the engine does not run it (it runs llama, mistral, mixtral, "
                "qwen2 and qwen3)");
  }
  // Attention kinds the engine's kernels do not compute: refused by name,
  // never run as grouped-query attention.
  if (d.is_mla())
    throw Error("model '" + excerpt(d.name, 80) +
                "': the engine does not implement multi-head latent attention (kv_lora_rank); the simulator prices it");
  // Hybrid layers (linear attention, Mamba-2, mixer-less or per-layer MLPs,
  // gated or ungated variants): named, on every backend (CPU and CUDA).
  for (LayerAttention kind : {LayerAttention::linear, LayerAttention::mamba, LayerAttention::none})
    if (d.layers_of(kind) > 0)
      throw Error("model '" + excerpt(d.name, 80) + "': the engine does not implement " +
                  layer_attention_name(kind) + " layers (" + std::to_string(d.layers_of(kind)) +
                  " of them; Gated DeltaNet, Mamba-2 or MLP-only blocks); the simulator prices them");
  if (!d.layer_mlp.empty() || !d.mlp_gated || d.attn_output_gate)
    throw Error("model '" + excerpt(d.name, 80) +
                "': the engine does not implement per-layer MLP kinds, ungated (relu2) MLPs or gated attention "
                "output (layer_mlp, mlp_gated, attn_output_gate); the simulator prices them");
  if (!d.layer_attention.empty() || d.attention_chunk_size > 0)
    throw Error("model '" + excerpt(d.name, 80) +
                "': the engine does not implement per-layer sliding-window or chunked local attention (layer_types, "
                "attention_chunk_size); the simulator prices it");
  if (d.attention_sinks)
    throw Error("model '" + excerpt(d.name, 80) + "': the engine does not implement attention sinks; the simulator prices them");
  if (d.qk_norm == QkNorm::per_layer) {
    throw Error("model '" + excerpt(d.name, 80) +
                "': a per-layer q/k norm is priced by the simulator only; the engine runs Qwen3's per-head one");
  }
}

// The rope_scaling types the forward pass applies. Keys whose other values
// it does not implement are refused here, where the engine starts, rather
// than run as if they were absent.
RopeScaling rope_scaling_of(const ModelDesc& d) {
  const std::string& rope = d.rope_scaling.type;
  if (rope == "linear") return RopeScaling::linear;
  if (rope == "llama3") return RopeScaling::llama3;
  if (!rope.empty()) {
    throw Error("model '" + excerpt(d.name, 80) + "': rope_scaling type '" + excerpt(rope, 40) +
                "' is not applied by the engine (it applies linear and llama3); the simulator does not need it");
  }
  return RopeScaling::none;
}

// MLP kinds the engine does not run.
void refuse_mlp_kinds(const ModelDesc& d) {
  if (d.n_shared_experts > 0 || d.first_k_dense_replace > 0 ||
      (d.moe_intermediate_size > 0 && d.moe_intermediate_size != d.intermediate_size)) {
    throw Error("model '" + excerpt(d.name, 80) +
                "': DeepSeek-style MoE (shared experts, dense first layers, moe_intermediate_size) is priced by the "
                "simulator only; the engine runs Mixtral-style MoE");
  }
  if (d.mlp_bias) throw Error("model '" + excerpt(d.name, 80) + "': mlp_bias true is not supported by the engine (MLP biases)");
  if (d.hidden_act != "silu" && d.hidden_act != "swish") {
    throw Error("model '" + excerpt(d.name, 80) + "': hidden_act '" + excerpt(d.hidden_act, 40) + "' is not supported by the engine (it runs silu)");
  }
}

}  // namespace

ModelConfig model_config_from(const ModelDesc& d) {
  refuse_layer_kinds(d);
  const RopeScaling rope_scaling = rope_scaling_of(d);
  refuse_mlp_kinds(d);
  ModelConfig c;
  c.name = d.name;
  c.hidden_size = d.hidden_size;
  c.intermediate_size = d.intermediate_size;
  c.num_layers = d.num_hidden_layers;
  c.num_heads = d.num_attention_heads;
  c.num_kv_heads = d.num_key_value_heads > 0 ? d.num_key_value_heads : d.num_attention_heads;
  c.head_dim = d.head_dim > 0 ? d.head_dim : (d.num_attention_heads > 0 ? d.hidden_size / d.num_attention_heads : 0);
  c.vocab_size = d.vocab_size;
  c.max_position_embeddings = d.max_position_embeddings;
  c.rms_norm_eps = d.rms_norm_eps;
  c.rope_theta = d.rope_theta;
  c.rope_scaling = rope_scaling;
  c.rope_factor = d.rope_scaling.factor;
  c.rope_low_freq_factor = d.rope_scaling.low_freq_factor;
  c.rope_high_freq_factor = d.rope_scaling.high_freq_factor;
  c.rope_original_max_position = d.rope_scaling.original_max_position_embeddings;
  c.sliding_window = d.sliding_window;
  c.tie_word_embeddings = d.tie_word_embeddings;
  c.attention_bias = d.attention_bias;
  c.qk_norm = d.qk_norm == QkNorm::per_head;
  c.num_experts = d.num_local_experts;
  c.experts_per_token = d.num_experts_per_tok;
  check_model_config(c);
  return c;
}

RopeConfig rope_config(const ModelConfig& config) {
  RopeConfig rope;
  rope.head_dim = static_cast<std::int32_t>(config.head_dim);
  rope.theta = static_cast<float>(config.rope_theta);
  rope.scaling = config.rope_scaling;
  if (config.rope_scaling != RopeScaling::none) {
    rope.factor = config.rope_factor;
    rope.low_freq_factor = config.rope_low_freq_factor;
    rope.high_freq_factor = config.rope_high_freq_factor;
    rope.original_max_position = static_cast<double>(config.rope_original_max_position);
  }
  return rope;
}

void check_model_config(const ModelConfig& c) {
  auto positive = [&](const char* key, std::int64_t v) {
    if (v <= 0) throw Error("model '" + excerpt(c.name, 80) + "': " + key + " must be positive, got " + std::to_string(v));
  };
  positive("hidden_size", c.hidden_size);
  positive("intermediate_size", c.intermediate_size);
  positive("num_hidden_layers", c.num_layers);
  positive("num_attention_heads", c.num_heads);
  positive("num_key_value_heads", c.num_kv_heads);
  positive("head_dim", c.head_dim);
  positive("vocab_size", c.vocab_size);
  positive("max_position_embeddings", c.max_position_embeddings);
  if (c.num_heads % c.num_kv_heads != 0) {
    throw Error("model '" + excerpt(c.name, 80) + "': num_attention_heads " + std::to_string(c.num_heads) +
                " is not a multiple of num_key_value_heads " + std::to_string(c.num_kv_heads));
  }
  if (c.head_dim % 2 != 0) throw Error("model '" + excerpt(c.name, 80) + "': head_dim must be even for rotary embeddings");
  if (c.is_moe() && (c.experts_per_token <= 0 || c.experts_per_token > c.num_experts)) {
    throw Error("model '" + excerpt(c.name, 80) + "': num_experts_per_tok must be in 1.." + std::to_string(c.num_experts));
  }
}

}  // namespace twin
