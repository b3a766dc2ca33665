#include "models/hybrid_config.hpp"

#include <cstddef>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "models/json_fields.hpp"

namespace twin {

namespace {

bool present(const nlohmann::json& j, const char* key) { return j.contains(key) && !j.at(key).is_null(); }

void fill(nlohmann::json& v, const char* key, const nlohmann::json& value) {
  if (!present(v, key)) v[key] = value;
}

int64_t positive(const nlohmann::json& j, const char* key, const std::string& origin, const std::string& why) {
  if (!present(j, key)) json_field_error(origin, key, "missing (" + why + ")");
  const int64_t v = json_int(j, key, origin);
  if (v <= 0) json_field_error(origin, key, "expected a positive integer, got " + std::to_string(v));
  return v;
}

// The first of two spellings present (HF's attribute, or its constructor argument).
const char* either(const nlohmann::json& j, const char* a, const char* b) { return present(j, b) && !present(j, a) ? b : a; }

// Gemma 3's and Llama 4's multimodal configs keep the language model in
// text_config; the keys that describe the checkpoint stay at the top.
nlohmann::json unwrap_text_config(const nlohmann::json& j, const std::string& type, const std::string& origin) {
  const auto& text = j.at("text_config");
  if (!text.is_object()) json_field_error(origin, "text_config", "expected an object");
  nlohmann::json v = text;
  for (const char* key : {"name", "hf_id", "_name_or_path", "quantization_config", "torch_dtype", "dtype",
                          "tie_word_embeddings"})
    if (present(j, key) && !present(v, key)) v[key] = j.at(key);
  if (!v.contains("model_type") || !v.at("model_type").is_string()) v["model_type"] = type + "_text";
  return v;
}

// transformers' Gemma3TextConfig defaults (a saved config.json leaves out
// the keys that equal them).
void gemma3_defaults(nlohmann::json& v) {
  fill(v, "vocab_size", 262208);
  fill(v, "hidden_size", 2304);
  fill(v, "intermediate_size", 9216);
  fill(v, "num_hidden_layers", 26);
  fill(v, "num_attention_heads", 8);
  fill(v, "num_key_value_heads", 4);
  fill(v, "head_dim", 256);
  fill(v, "max_position_embeddings", 131072);
  fill(v, "rms_norm_eps", 1e-6);
  fill(v, "rope_theta", 1000000.0);
  fill(v, "sliding_window", 4096);
  fill(v, "tie_word_embeddings", true);
  if (present(v, "hidden_activation")) v["hidden_act"] = v.at("hidden_activation");
  fill(v, "hidden_act", "gelu_pytorch_tanh");
}

// transformers' Llama4TextConfig defaults; its expert width is
// intermediate_size and its dense layers' intermediate_size_mlp, and each
// MoE layer has one shared expert of the experts' width.
void llama4_view(nlohmann::json& v, const std::string& origin) {
  fill(v, "vocab_size", 202048);
  fill(v, "hidden_size", 5120);
  fill(v, "intermediate_size", 8192);
  fill(v, "intermediate_size_mlp", 16384);
  fill(v, "num_hidden_layers", 48);
  fill(v, "num_attention_heads", 40);
  fill(v, "num_key_value_heads", 8);
  fill(v, "head_dim", 128);
  fill(v, "max_position_embeddings", 131072);
  fill(v, "rms_norm_eps", 1e-5);
  fill(v, "rope_theta", 500000.0);
  fill(v, "num_local_experts", 16);
  fill(v, "num_experts_per_tok", 1);
  fill(v, "tie_word_embeddings", false);
  const int64_t dense = positive(v, "intermediate_size_mlp", origin, "Llama 4's dense MLP width");
  v["moe_intermediate_size"] = v.at("intermediate_size");
  v["intermediate_size"] = dense;
  v["n_shared_experts"] = 1;
}

// Qwen3-Next: num_experts, and a shared expert of its own width (summed
// shared experts of the routed experts' width here).
void qwen3_next_view(nlohmann::json& v, const std::string& origin) {
  if (present(v, "num_experts") && !present(v, "num_local_experts")) v["num_local_experts"] = v.at("num_experts");
  if (present(v, "shared_expert_intermediate_size")) {
    const int64_t shared = json_int(v, "shared_expert_intermediate_size", origin);
    const int64_t expert = positive(v, "moe_intermediate_size", origin, "the experts' width");
    if (shared < 0 || shared % expert != 0)
      json_field_error(origin, "shared_expert_intermediate_size",
                       "expected a multiple of moe_intermediate_size (" + std::to_string(expert) + ")");
    v["n_shared_experts"] = shared / expert;
  }
}

// Nemotron-H: the layer count from its pattern, its own key names for the
// norm's epsilon and the MLP's activation.
void nemotron_h_view(nlohmann::json& v) {
  if (!present(v, "num_hidden_layers") && present(v, "hybrid_override_pattern") &&
      v.at("hybrid_override_pattern").is_string())
    v["num_hidden_layers"] = v.at("hybrid_override_pattern").get<std::string>().size();
  if (!present(v, "num_hidden_layers") && present(v, "layers_block_type") && v.at("layers_block_type").is_array())
    v["num_hidden_layers"] = v.at("layers_block_type").size();
  fill(v, "vocab_size", 131072);
  fill(v, "max_position_embeddings", 4096);
  if (present(v, "layer_norm_epsilon")) fill(v, "rms_norm_eps", v.at("layer_norm_epsilon"));
  if (present(v, "mlp_hidden_act")) v["hidden_act"] = v.at("mlp_hidden_act");
  fill(v, "hidden_act", "relu2");
}

// A mixer kind per layer from a period: layer i is `every` when (i + 1) % period == 0.
std::vector<LayerAttention> periodic(int64_t layers, int64_t period, LayerAttention every, LayerAttention other) {
  std::vector<LayerAttention> kinds(static_cast<std::size_t>(layers), other);
  for (int64_t i = period - 1; i < layers; i += period) kinds[static_cast<std::size_t>(i)] = every;
  return kinds;
}

void read_gemma3(const nlohmann::json& j, const std::string& origin, ModelDesc& m) {
  m.qk_norm = QkNorm::per_head;
  // Older configs: sliding_window_pattern (every Nth layer global); newer: layer_types.
  if (m.layer_attention.empty() && m.sliding_window > 0) {
    const int64_t period = present(j, "sliding_window_pattern") ? positive(j, "sliding_window_pattern", origin, "") : 6;
    m.layer_attention = periodic(m.num_hidden_layers, period, LayerAttention::full, LayerAttention::sliding);
  }
}

void read_llama4(const nlohmann::json& j, const std::string& origin, ModelDesc& m) {
  const int64_t layers = m.num_hidden_layers;
  if (present(j, "attention_chunk_size")) m.attention_chunk_size = positive(j, "attention_chunk_size", origin, "");
  if (m.layer_attention.empty() && m.attention_chunk_size > 0) {
    // no_rope_layers[i] = 1: a RoPE layer with chunked attention; 0: a NoPE
    // layer attending to everything (default: every 4th).
    if (present(j, "no_rope_layers")) {
      const auto& list = j.at("no_rope_layers");
      if (!list.is_array() || static_cast<int64_t>(list.size()) != layers)
        json_field_error(origin, "no_rope_layers", "expected an array of num_hidden_layers 0s and 1s");
      for (std::size_t i = 0; i < list.size(); ++i) {
        if (!list[i].is_number_integer() || (list[i].get<int64_t>() != 0 && list[i].get<int64_t>() != 1))
          json_field_error(origin, "no_rope_layers[" + std::to_string(i) + "]", "expected 0 or 1");
        m.layer_attention.push_back(list[i].get<int64_t>() == 1 ? LayerAttention::chunked : LayerAttention::full);
      }
    } else {
      const int64_t period = present(j, "no_rope_layer_interval") ? positive(j, "no_rope_layer_interval", origin, "") : 4;
      m.layer_attention = periodic(layers, period, LayerAttention::full, LayerAttention::chunked);
    }
  }
  if (m.layers_of(LayerAttention::chunked) > 0 && m.attention_chunk_size <= 0)
    json_field_error(origin, "attention_chunk_size", "missing, and layer_types has chunked_attention layers");
  // MoE layers: moe_layers, else every interleave_moe_layer_step-th layer.
  m.layer_mlp.assign(static_cast<std::size_t>(layers), LayerMlp::dense);
  if (present(j, "moe_layers")) {
    const auto& list = j.at("moe_layers");
    if (!list.is_array()) json_field_error(origin, "moe_layers", "expected an array of layer indices");
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (!list[i].is_number_integer() || list[i].get<int64_t>() < 0 || list[i].get<int64_t>() >= layers)
        json_field_error(origin, "moe_layers[" + std::to_string(i) + "]", "expected a layer index below num_hidden_layers");
      m.layer_mlp[list[i].get<std::size_t>()] = LayerMlp::moe;
    }
  } else {
    const int64_t step = present(j, "interleave_moe_layer_step") ? positive(j, "interleave_moe_layer_step", origin, "") : 1;
    for (int64_t i = step - 1; i < layers; i += step) m.layer_mlp[static_cast<std::size_t>(i)] = LayerMlp::moe;
  }
}

void read_qwen3_next(const nlohmann::json& j, const std::string& origin, ModelDesc& m) {
  const int64_t layers = m.num_hidden_layers;
  m.qk_norm = QkNorm::per_head;
  m.attn_output_gate = true;  // Qwen3-Next's gated attention: q_proj puts out a gate per query value
  if (m.layer_attention.empty()) {
    const int64_t period = positive(j, "full_attention_interval", origin, "Qwen3-Next's layer_types or its period");
    m.layer_attention = periodic(layers, period, LayerAttention::full, LayerAttention::linear);
  }
  // HF's rule: a layer is sparse unless listed in mlp_only_layers, every decoder_sparse_step-th.
  const int64_t step = present(j, "decoder_sparse_step") ? positive(j, "decoder_sparse_step", origin, "") : 1;
  m.layer_mlp.assign(static_cast<std::size_t>(layers), LayerMlp::dense);
  for (int64_t i = 0; i < layers; ++i)
    if (m.is_moe() && (i + 1) % step == 0) m.layer_mlp[static_cast<std::size_t>(i)] = LayerMlp::moe;
  if (present(j, "mlp_only_layers")) {
    const auto& list = j.at("mlp_only_layers");
    if (!list.is_array()) json_field_error(origin, "mlp_only_layers", "expected an array of layer indices");
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (!list[i].is_number_integer() || list[i].get<int64_t>() < 0 || list[i].get<int64_t>() >= layers)
        json_field_error(origin, "mlp_only_layers[" + std::to_string(i) + "]", "expected a layer index below num_hidden_layers");
      m.layer_mlp[list[i].get<std::size_t>()] = LayerMlp::dense;
    }
  }
}

void read_linear_attention(const nlohmann::json& j, const std::string& origin, ModelDesc& m) {
  const std::string why = "linear_attention layers need it";
  m.linear_num_key_heads = positive(j, "linear_num_key_heads", origin, why);
  m.linear_num_value_heads = positive(j, "linear_num_value_heads", origin, why);
  m.linear_key_head_dim = positive(j, "linear_key_head_dim", origin, why);
  m.linear_value_head_dim = positive(j, "linear_value_head_dim", origin, why);
  m.linear_conv_kernel_dim = positive(j, "linear_conv_kernel_dim", origin, why);
  if (m.linear_num_value_heads % m.linear_num_key_heads != 0)
    json_field_error(origin, "linear_num_value_heads", "expected a multiple of linear_num_key_heads");
}

// Nemotron-H's hybrid_override_pattern ("M" Mamba-2, "*" attention, "-"
// MLP; one block each) or layers_block_type ("mamba", "attention", "mlp").
void read_nemotron_h(const nlohmann::json& j, const std::string& origin, ModelDesc& m) {
  std::vector<std::string> blocks;
  const char* key = present(j, "layers_block_type") ? "layers_block_type" : "hybrid_override_pattern";
  if (!present(j, key)) json_field_error(origin, "hybrid_override_pattern", "missing (Nemotron-H's layer pattern)");
  if (j.at(key).is_string()) {
    for (char c : j.at(key).get<std::string>())
      blocks.emplace_back(c == 'M' ? "mamba" : c == '*' ? "attention" : c == '-' ? "mlp" : std::string(1, c));
  } else if (j.at(key).is_array()) {
    for (const auto& b : j.at(key)) blocks.push_back(b.is_string() ? b.get<std::string>() : b.dump());
  } else {
    json_field_error(origin, key, "expected a string of M, * and - (or an array of block names)");
  }
  if (static_cast<int64_t>(blocks.size()) != m.num_hidden_layers)
    json_field_error(origin, key, "expected num_hidden_layers (" + std::to_string(m.num_hidden_layers) + ") blocks");
  m.layer_attention.clear();
  m.layer_mlp.clear();
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const std::string& b = blocks[i];
    if (b != "mamba" && b != "attention" && b != "mlp")
      json_field_error(origin, std::string(key) + "[" + std::to_string(i) + "]",
                       "expected M (mamba), * (attention) or - (mlp), got '" + excerpt(b, 40) +
                           "' (Nemotron-H's MoE blocks are not modelled)");
    m.layer_attention.push_back(b == "mamba" ? LayerAttention::mamba
                                : b == "attention" ? LayerAttention::full
                                                   : LayerAttention::none);
    m.layer_mlp.push_back(b == "mlp" ? LayerMlp::dense : LayerMlp::none);
  }
  if (m.hidden_act != "relu2")
    json_field_error(origin, "mlp_hidden_act", "expected \"relu2\" (Nemotron-H's MLP), got '" + excerpt(m.hidden_act, 40) + "'");
  m.mlp_gated = false;
  const std::string why = "mamba layers need it";
  m.mamba_num_heads = positive(j, "mamba_num_heads", origin, why);
  m.mamba_head_dim = positive(j, "mamba_head_dim", origin, why);
  m.ssm_state_size = positive(j, "ssm_state_size", origin, why);
  m.mamba_n_groups = positive(j, either(j, "n_groups", "mamba_n_groups"), origin, why);
  m.mamba_conv_kernel = positive(j, either(j, "conv_kernel", "mamba_d_conv"), origin, why);
  const char* chunk = either(j, "chunk_size", "mamba_chunk_size");
  if (present(j, chunk)) m.mamba_chunk_size = positive(j, chunk, origin, "");
  if (m.mamba_num_heads % m.mamba_n_groups != 0)
    json_field_error(origin, "n_groups", "expected a divisor of mamba_num_heads (" + std::to_string(m.mamba_num_heads) + ")");
}

}  // namespace

nlohmann::json hybrid_config_view(const nlohmann::json& j, const std::string& origin) {
  const std::string type = j.contains("model_type") && j.at("model_type").is_string() ? j.at("model_type").get<std::string>() : "";
  if (type != "gemma3" && type != "gemma3_text" && type != "llama4" && type != "llama4_text" &&
      type != "qwen3_next" && type != "nemotron_h")
    return j;
  nlohmann::json v = (type == "gemma3" || type == "llama4") && present(j, "text_config")
                         ? unwrap_text_config(j, type, origin)
                         : j;
  if (type == "gemma3" || type == "llama4") v["model_type"] = type + "_text";
  const std::string text_type = v.at("model_type").get<std::string>();
  if (text_type == "gemma3_text") gemma3_defaults(v);
  if (text_type == "llama4_text") llama4_view(v, origin);
  if (text_type == "qwen3_next") qwen3_next_view(v, origin);
  if (text_type == "nemotron_h") nemotron_h_view(v);
  return v;
}

void read_hybrid_layers(const nlohmann::json& j, const std::string& origin, ModelDesc& m) {
  if (m.model_type == "gemma3_text") read_gemma3(j, origin, m);
  if (m.model_type == "llama4_text") read_llama4(j, origin, m);
  if (m.model_type == "qwen3_next") read_qwen3_next(j, origin, m);
  if (m.model_type == "nemotron_h") read_nemotron_h(j, origin, m);
  if (m.model_type == "glm4_moe" && present(j, "use_qk_norm") && json_bool(j, "use_qk_norm", origin))
    m.qk_norm = QkNorm::per_head;
  if (m.layers_of(LayerAttention::linear) > 0) read_linear_attention(j, origin, m);
}

}  // namespace twin
