#pragma once
// The model shape the runtime executes, as plain data, made from models/'s
// ModelDesc (model_config_from) and checked once.
#include <cstdint>
#include <string>

#include "engine/backend/op_args.hpp"

namespace twin {

struct ModelDesc;  // models/model_desc.hpp

struct ModelConfig {
  std::string name;
  std::int64_t hidden_size = 0;
  std::int64_t intermediate_size = 0;  // per expert for MoE
  std::int64_t num_layers = 0;
  std::int64_t num_heads = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t vocab_size = 0;
  std::int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling = RopeScaling::none;  // model_config_from refuses other types
  double rope_factor = 1.0;
  double rope_low_freq_factor = 1.0;
  double rope_high_freq_factor = 4.0;
  std::int64_t rope_original_max_position = 0;
  std::int64_t sliding_window = 0;  // 0: full attention
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  // Qwen3's per-head RMSNorm of Q and K (q_norm, k_norm: [head_dim] each)
  // between the QKV projection and the rotary embedding.
  bool qk_norm = false;
  std::int64_t num_experts = 0;  // 0: dense MLP
  std::int64_t experts_per_token = 0;

  std::int64_t q_dim() const { return num_heads * head_dim; }
  std::int64_t kv_dim() const { return num_kv_heads * head_dim; }
  bool is_moe() const { return num_experts > 0; }
};

// Defined in model_config.cpp, the one runtime file that includes models/.
ModelConfig model_config_from(const ModelDesc& desc);

// The rotary embedding of every layer: head_dim, theta and rope_scaling.
RopeConfig rope_config(const ModelConfig& config);

// Throws twin::Error naming the field when the shape cannot be executed
// (non-positive sizes, heads not a multiple of KV heads).
void check_model_config(const ModelConfig& config);

}  // namespace twin
