#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "base/error.hpp"
#include "models/embedded_file.hpp"
#include "models/hybrid_config.hpp"
#include "models/json_fields.hpp"
#include "models/quantization.hpp"
#include "models/model_desc.hpp"

namespace twin {

namespace {

// Architectures whose blocks match the op list in step_ops.hpp. Others (GPT-2,
// Gemma, DeepSeek MLA, ...) differ in ways we would silently get wrong.
constexpr const char* kSupportedTypes[] = {"llama",       "mistral",  "mixtral",     "qwen2",       "qwen3",
                                           "qwen3_moe",   "minimax_m2", "deepseek_v3", "kimi_k2",   "gpt_oss",
                                           "gemma3",      "gemma3_text", "llama4",     "llama4_text", "qwen3_next",
                                           "nemotron_h",  "glm4_moe"};

std::string supported_types_text() {
  std::string out;
  for (const char* t : kSupportedTypes) out += (out.empty() ? "" : ", ") + std::string(t);
  return out;
}

void require_positive(const std::string& origin, const char* key, int64_t v) {
  if (v <= 0) json_field_error(origin, key, "expected a positive integer, got " + std::to_string(v));
}

// rope_scaling: null, or an object with rope_type (older configs: type).
// The keys a type needs must be there; the others are ignored.
RopeScalingDesc rope_scaling_from_json(const nlohmann::json& j, const std::string& origin) {
  RopeScalingDesc r;
  if (j.is_null()) return r;
  if (!j.is_object()) json_field_error(origin, "rope_scaling", "expected an object or null");
  auto number = [&](const char* key) {
    const std::string name = std::string("rope_scaling.") + key;
    if (!j.contains(key) || !j.at(key).is_number()) json_field_error(origin, name, "expected a number");
    const double v = j.at(key).get<double>();
    if (!(v > 0) || !std::isfinite(v)) json_field_error(origin, name, "expected a positive number");
    return v;
  };
  const char* type_key = j.contains("rope_type") ? "rope_type" : "type";
  if (!j.contains(type_key) || !j.at(type_key).is_string())
    json_field_error(origin, "rope_scaling.rope_type", "expected a string (linear, llama3, ...)");
  r.type = j.at(type_key).get<std::string>();
  if (r.type == "default") r.type.clear();
  if (r.type.empty()) return r;
  if (j.contains("factor")) r.factor = number("factor");
  if (r.type == "linear") r.factor = number("factor");
  if (r.type == "llama3") {
    r.factor = number("factor");
    r.low_freq_factor = number("low_freq_factor");
    r.high_freq_factor = number("high_freq_factor");
    // Equal factors (Llama 4's 1.0 and 1.0) leave no band between the two: valid.
    if (!(r.high_freq_factor >= r.low_freq_factor))
      json_field_error(origin, "rope_scaling.high_freq_factor", "expected at least low_freq_factor");
    const double original = number("original_max_position_embeddings");
    if (original != std::floor(original))
      json_field_error(origin, "rope_scaling.original_max_position_embeddings", "expected a positive integer");
    r.original_max_position_embeddings = static_cast<int64_t>(original);
  }
  return r;
}

// The keys of Qwen3, Qwen3-MoE and MiniMax-M2 configs that change the
// layer: the q/k norm (implied by the Qwen3 types; MiniMax-M2's
// use_qk_norm and qk_norm_type), and the layer mixes this registry does
// not describe (Qwen3-MoE dense layers between sparse ones, MiniMax's
// linear-attention layers, shared experts), refused by name.
void read_qk_norm_and_moe_layout(const nlohmann::json& j, const std::string& origin, ModelDesc& m) {
  auto present = [&](const char* key) { return j.contains(key) && !j.at(key).is_null(); };
  if (m.model_type == "qwen3" || m.model_type == "qwen3_moe") m.qk_norm = QkNorm::per_head;
  if (m.model_type == "qwen3_moe") {
    if (present("decoder_sparse_step") && json_int(j, "decoder_sparse_step", origin) != 1)
      json_field_error(origin, "decoder_sparse_step", "expected 1 (dense MLP layers between sparse ones are not modelled)");
    if (present("mlp_only_layers") && !(j.at("mlp_only_layers").is_array() && j.at("mlp_only_layers").empty()))
      json_field_error(origin, "mlp_only_layers", "expected [] (dense MLP layers among the sparse ones are not modelled)");
    if (present("shared_expert_intermediate_size") && json_int(j, "shared_expert_intermediate_size", origin) != 0)
      json_field_error(origin, "shared_expert_intermediate_size", "expected 0 (Qwen3-MoE has no shared expert)");
  }
  if (m.model_type != "minimax_m2") return;
  if (!present("use_qk_norm") || json_bool(j, "use_qk_norm", origin)) {
    const std::string type = present("qk_norm_type") ? json_string(j, "qk_norm_type", origin) : "per_layer";
    if (type == "per_layer")
      m.qk_norm = QkNorm::per_layer;
    else if (type == "per_head")
      m.qk_norm = QkNorm::per_head;
    else
      json_field_error(origin, "qk_norm_type", "expected \"per_layer\" or \"per_head\", got \"" + excerpt(type) + "\"");
  }
  if (present("attn_type_list")) {
    const auto& list = j.at("attn_type_list");
    if (!list.is_array()) json_field_error(origin, "attn_type_list", "expected an array of 1s (full attention)");
    for (std::size_t i = 0; i < list.size(); ++i)
      if (!list[i].is_number_integer() || list[i].get<int64_t>() != 1)
        json_field_error(origin, "attn_type_list[" + std::to_string(i) + "]",
                         "expected 1 (full attention; MiniMax's lightning-attention layers are not modelled)");
  }
  if (present("shared_intermediate_size") && json_int(j, "shared_intermediate_size", origin) != 0)
    json_field_error(origin, "shared_intermediate_size", "expected 0 (MiniMax-M2's shared experts are not modelled)");
}

// config.json's quantization_config (vLLM reads the checkpoint's method from
// it): our method name in m.quantization; a method we do not price is
// refused naming the key, not priced as a 16-bit checkpoint.
void read_quantization_config(const nlohmann::json& j, const std::string& origin, ModelDesc& m) {
  auto it = j.find("quantization_config");
  if (it == j.end() || it->is_null()) return;
  if (!it->is_object()) json_field_error(origin, "quantization_config", "expected an object");
  const std::string method = it->contains("quant_method")
                                 ? json_string(*it, "quant_method", origin + ": quantization_config")
                                 : std::string();
  if (method.empty()) json_field_error(origin, "quantization_config.quant_method", "missing required field");
  const std::string algo = it->contains("quant_algo") && (*it)["quant_algo"].is_string()
                               ? (*it)["quant_algo"].get<std::string>()
                               : std::string();
  try {
    m.quantization = checkpoint_quant_method(method, algo);
  } catch (const UsageError& e) {
    json_field_error(origin, "quantization_config", e.what());
  }
}

// Multi-head latent attention (DeepSeek-V2/V3's and Kimi K2's
// kv_lora_rank and its companions). The query/key head is qk_nope +
// qk_rope wide (head_dim, whatever the config's head_dim says: HF's
// DeepseekV3Config sets it to qk_rope_head_dim), and every query head has
// its own up-projected key and value (num_key_value_heads = heads).
void read_mla(const nlohmann::json& j, const std::string& origin, ModelDesc& m) {
  auto present = [&](const char* key) { return j.contains(key) && !j.at(key).is_null(); };
  if (!present("kv_lora_rank")) {
    for (const char* key : {"q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"})
      if (present(key) && (m.model_type == "deepseek_v3" || m.model_type == "kimi_k2"))
        json_field_error(origin, key, "given without kv_lora_rank (multi-head latent attention needs both)");
    return;
  }
  if (m.model_type != "deepseek_v3" && m.model_type != "kimi_k2")
    json_field_error(origin, "kv_lora_rank",
                     "multi-head latent attention is read for model_type deepseek_v3 and kimi_k2 only, not '" +
                         excerpt(m.model_type) + "'");
  auto positive = [&](const char* key) {
    if (!present(key)) json_field_error(origin, key, "missing (multi-head latent attention needs it)");
    const int64_t v = json_int(j, key, origin);
    require_positive(origin, key, v);
    return v;
  };
  m.kv_lora_rank = positive("kv_lora_rank");
  m.qk_nope_head_dim = positive("qk_nope_head_dim");
  m.qk_rope_head_dim = positive("qk_rope_head_dim");
  m.v_head_dim = positive("v_head_dim");
  // DeepSeek-V2-Lite's null q_lora_rank: queries straight from the hidden state.
  m.q_lora_rank = present("q_lora_rank") ? positive("q_lora_rank") : 0;
  if (m.qk_rope_head_dim % 2 != 0) json_field_error(origin, "qk_rope_head_dim", "expected an even number (rotary pairs)");
  m.head_dim = m.qk_nope_head_dim + m.qk_rope_head_dim;
  if (present("num_key_value_heads") && json_int(j, "num_key_value_heads", origin) != m.num_attention_heads)
    json_field_error(origin, "num_key_value_heads",
                     "expected num_attention_heads (" + std::to_string(m.num_attention_heads) +
                         ") with multi-head latent attention: every head has its own up-projected key and value");
  m.num_key_value_heads = m.num_attention_heads;
  // Layers interleaving dense and MoE MLPs, and the multi-token-prediction
  // layers: the first is refused, the second not loaded by vLLM for the
  // target model (nor priced here).
  if (present("moe_layer_freq") && json_int(j, "moe_layer_freq", origin) != 1)
    json_field_error(origin, "moe_layer_freq", "expected 1 (MoE layers interleaved with dense ones are not modelled)");
}

// Hugging Face's layer_types (GPT-OSS, Gemma 3; newer transformers write it
// for every model): "full_attention" or "sliding_attention" per layer. A list
// of full layers only changes nothing; a mix makes the model's
// sliding_window apply to its sliding layers only. Other kinds (Qwen3-Next's
// "linear_attention", ...) are refused naming the entry.
void read_layer_types(const nlohmann::json& j, const std::string& origin, ModelDesc& m) {
  if (!j.contains("layer_types") || j.at("layer_types").is_null()) return;
  const auto& list = j.at("layer_types");
  if (!list.is_array() || static_cast<int64_t>(list.size()) != m.num_hidden_layers)
    json_field_error(origin, "layer_types",
                     "expected an array of num_hidden_layers (" + std::to_string(m.num_hidden_layers) + ") strings");
  std::vector<LayerAttention> kinds;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string key = "layer_types[" + std::to_string(i) + "]";
    const std::string t = list[i].is_string() ? list[i].get<std::string>() : std::string();
    // Qwen3-Next's Gated DeltaNet layers; Llama 4's chunked local layers.
    const bool linear_ok = m.model_type == "qwen3_next";
    if (t == "full_attention")
      kinds.push_back(LayerAttention::full);
    else if (t == "sliding_attention")
      kinds.push_back(LayerAttention::sliding);
    else if (t == "chunked_attention")
      kinds.push_back(LayerAttention::chunked);
    else if (t == "linear_attention" && linear_ok)
      kinds.push_back(LayerAttention::linear);
    else
      json_field_error(origin, key,
                       "expected \"full_attention\", \"sliding_attention\", \"chunked_attention\"" +
                           std::string(linear_ok ? " or \"linear_attention\"" : "") + ", got " +
                           excerpt(list[i].dump()) +
                           (t == "linear_attention" ? " (linear attention is read for model_type qwen3_next)"
                                                    : " (other layer kinds are not modelled)"));
  }
  if (std::all_of(kinds.begin(), kinds.end(), [](LayerAttention a) { return a == LayerAttention::full; })) return;
  if (m.sliding_window <= 0 && std::count(kinds.begin(), kinds.end(), LayerAttention::sliding) > 0)
    json_field_error(origin, "sliding_window", "missing, and layer_types has sliding_attention layers");
  m.layer_attention = std::move(kinds);
}

namespace {

void read_sizes(const nlohmann::json& j, const std::string& origin, ModelDesc& m) {
  m.hidden_size = json_int(j, "hidden_size", origin);
  m.intermediate_size = json_int(j, "intermediate_size", origin);
  m.num_hidden_layers = json_int(j, "num_hidden_layers", origin);
  m.num_attention_heads = json_int(j, "num_attention_heads", origin);
  m.vocab_size = json_int(j, "vocab_size", origin);
  m.max_position_embeddings = json_int(j, "max_position_embeddings", origin);
  require_positive(origin, "hidden_size", m.hidden_size);
  require_positive(origin, "intermediate_size", m.intermediate_size);
  require_positive(origin, "num_hidden_layers", m.num_hidden_layers);
  // Layer counts feed 32-bit op repeats (step_ops); real models have ~100.
  if (m.num_hidden_layers > 100000) {
    json_field_error(origin, "num_hidden_layers", "expected at most 100000, got " + std::to_string(m.num_hidden_layers));
  }
  require_positive(origin, "num_attention_heads", m.num_attention_heads);
  require_positive(origin, "vocab_size", m.vocab_size);
  require_positive(origin, "max_position_embeddings", m.max_position_embeddings);
  // The scheduler needs room for a prompt token and an output token; a
  // context of 1 would otherwise surface later as a max_model_len error, a
  // key the user never set.
  if (m.max_position_embeddings < 2)
    json_field_error(origin, "max_position_embeddings",
                     "expected at least 2 (one prompt and one output token), got " +
                         std::to_string(m.max_position_embeddings));

}

// Heads, head width, norms, rotary, windows and biases. HF leaves these out
// when they take the default; null means the same.
void read_attention(const nlohmann::json& j, const std::string& origin, ModelDesc& m) {
  auto present = [&](const char* key) { return j.contains(key) && !j.at(key).is_null(); };
  read_mla(j, origin, m);  // an MLA model's heads and head_dim are set there
  if (!m.is_mla())
    m.num_key_value_heads =
        present("num_key_value_heads") ? json_int(j, "num_key_value_heads", origin) : m.num_attention_heads;
  require_positive(origin, "num_key_value_heads", m.num_key_value_heads);
  if (m.num_attention_heads % m.num_key_value_heads != 0)
    json_field_error(origin, "num_key_value_heads",
                     "must divide num_attention_heads (" + std::to_string(m.num_attention_heads) +
                         "), got " + std::to_string(m.num_key_value_heads));
  if (m.is_mla()) {
    // read_mla set head_dim.
  } else if (present("head_dim")) {
    m.head_dim = json_int(j, "head_dim", origin);
    require_positive(origin, "head_dim", m.head_dim);
  } else {
    if (m.hidden_size % m.num_attention_heads != 0)
      json_field_error(origin, "head_dim",
                       "missing, and hidden_size is not a multiple of num_attention_heads");
    m.head_dim = m.hidden_size / m.num_attention_heads;
  }
  if (present("rms_norm_eps")) {
    m.rms_norm_eps = json_number(j, "rms_norm_eps", origin);
    if (!(m.rms_norm_eps > 0)) json_field_error(origin, "rms_norm_eps", "expected a positive number");
  }
  if (present("rope_theta")) {
    m.rope_theta = json_number(j, "rope_theta", origin);
    if (!(m.rope_theta > 0)) json_field_error(origin, "rope_theta", "expected a positive number");
  }
  if (j.contains("rope_scaling")) m.rope_scaling = rope_scaling_from_json(j.at("rope_scaling"), origin);
  // Mistral-style sliding-window attention (null: none). Qwen2 configs carry
  // a sliding_window they apply only with use_sliding_window, and then to
  // some layers only: that mix is refused rather than modelled wrongly.
  if (m.model_type == "qwen2" || m.model_type == "qwen3" || m.model_type == "qwen3_moe") {
    if (present("use_sliding_window") && json_bool(j, "use_sliding_window", origin))
      json_field_error(origin, "use_sliding_window",
                       "false (per-layer sliding windows are not supported)");
  } else if (present("sliding_window")) {
    m.sliding_window = json_int(j, "sliding_window", origin);
    require_positive(origin, "sliding_window", m.sliding_window);
  }
  read_layer_types(j, origin, m);
  // GPT-OSS: a learned sink logit per head in every layer's softmax.
  if (m.model_type == "gpt_oss") m.attention_sinks = true;
  if (present("tie_word_embeddings")) m.tie_word_embeddings = json_bool(j, "tie_word_embeddings", origin);
  // Qwen2 configs have no attention_bias key: the architecture always has
  // QKV biases. Llama-family configs say attention_bias: false.
  m.attention_bias = present("attention_bias") ? json_bool(j, "attention_bias", origin)
                                               : m.model_type == "qwen2";
  if (present("mlp_bias")) m.mlp_bias = json_bool(j, "mlp_bias", origin);
  if (present("hidden_act")) m.hidden_act = json_string(j, "hidden_act", origin);
}

void read_experts(const nlohmann::json& j, const std::string& origin, ModelDesc& m) {
  auto present = [&](const char* key) { return j.contains(key) && !j.at(key).is_null(); };
  // DeepSeek's configs call the routed experts n_routed_experts, Qwen3-MoE's num_experts.
  const char* experts_key = present("num_local_experts") ? "num_local_experts"
                            : present("n_routed_experts") ? "n_routed_experts"
                            : (m.model_type == "qwen3_moe" && present("num_experts")) ? "num_experts"
                                                                                      : nullptr;
  if (experts_key) {
    m.num_local_experts = json_int(j, experts_key, origin);
    if (m.num_local_experts < 0) json_field_error(origin, experts_key, "expected >= 0");
    if (m.num_local_experts == 1) m.num_local_experts = 0;  // one expert is a dense MLP
  }
  if (m.is_moe()) {
    m.num_experts_per_tok = json_int(j, "num_experts_per_tok", origin);
    if (m.num_experts_per_tok < 1 || m.num_experts_per_tok > m.num_local_experts)
      json_field_error(origin, "num_experts_per_tok",
                       "expected 1 to num_local_experts (" + std::to_string(m.num_local_experts) + ")");
    if (present("moe_intermediate_size")) {
      m.moe_intermediate_size = json_int(j, "moe_intermediate_size", origin);
      require_positive(origin, "moe_intermediate_size", m.moe_intermediate_size);
    }
    if (present("n_shared_experts")) {
      m.n_shared_experts = json_int(j, "n_shared_experts", origin);
      if (m.n_shared_experts < 0 || m.n_shared_experts > 1024)
        json_field_error(origin, "n_shared_experts", "expected 0 to 1024");
    }
    if (present("first_k_dense_replace")) {
      m.first_k_dense_replace = json_int(j, "first_k_dense_replace", origin);
      if (m.first_k_dense_replace < 0 || m.first_k_dense_replace >= m.num_hidden_layers)
        json_field_error(origin, "first_k_dense_replace",
                         "expected 0 to num_hidden_layers - 1 (" + std::to_string(m.num_hidden_layers - 1) + ")");
    }
  }
}

void check_parameter_count(const std::string& origin, const ModelDesc& m) {
  // Sizes are computed in int64 (parameters, bytes): a descriptor past any
  // real model would overflow them. Estimated in long double, generously.
  {
    const long double h = static_cast<long double>(m.hidden_size);
    const long double qd = static_cast<long double>(m.num_attention_heads) * static_cast<long double>(m.head_dim);
    const long double kvd = static_cast<long double>(m.num_key_value_heads) * static_cast<long double>(m.head_dim);
    const long double experts = static_cast<long double>(m.num_local_experts);
    const long double dense_mlp = 3 * h * static_cast<long double>(m.intermediate_size);
    // The experts' own size (moe_intermediate_size) and the shared experts.
    const long double moe_mlp = (experts + static_cast<long double>(m.n_shared_experts)) * 3 * h *
                                    static_cast<long double>(m.expert_intermediate_size()) +
                                h * experts;
    const long double layer = h * (2 * qd + 2 * kvd) + qd + 2 * kvd + std::max(dense_mlp, moe_mlp) + 2 * h;
    const long double params = 2 * static_cast<long double>(m.vocab_size) * h +
                               static_cast<long double>(m.num_hidden_layers) * layer + h;
    if (params > 1e15L) {
      char count[32];
      std::snprintf(count, sizeof count, "%.3Lg", params);
      throw Error(origin + ": hidden_size, intermediate_size, moe_intermediate_size, num_hidden_layers, the heads, "
                  "head_dim, vocab_size and experts give " + count + " parameters; expected at most 10^15");
    }
  }
}

void read_torch_dtype(const nlohmann::json& j, const std::string& origin, ModelDesc& m) {
  auto present = [&](const char* key) { return j.contains(key) && !j.at(key).is_null(); };
  // Newer transformers write "dtype" instead of "torch_dtype".
  const char* dtype_key = present("torch_dtype") ? "torch_dtype" : (present("dtype") ? "dtype" : nullptr);
  if (dtype_key) {
    std::string text = json_string(j, dtype_key, origin);
    try {
      m.torch_dtype = parse_dtype(text);
    } catch (const UsageError& e) {
      json_field_error(origin, dtype_key, e.what());
    }
  }
}

}  // namespace

ModelDesc model_from_json(const nlohmann::json& raw, const std::string& origin,
                          const std::string& default_name) {
  // Gemma 3's and Llama 4's text_config, the families' defaults and spellings.
  const nlohmann::json j = hybrid_config_view(raw, origin);
  ModelDesc m;
  m.name = j.contains("name") ? json_string(j, "name", origin) : default_name;
  if (m.name.empty()) json_field_error(origin, "name", "expected a non-empty string");
  for (const char* key : {"hf_id", "_name_or_path"}) {
    if (m.hf_id.empty() && j.contains(key) && j.at(key).is_string()) m.hf_id = j.at(key).get<std::string>();
  }
  m.model_type = j.contains("model_type") ? json_string(j, "model_type", origin) : "llama";
  if (std::find_if(std::begin(kSupportedTypes), std::end(kSupportedTypes),
                   [&](const char* t) { return m.model_type == t; }) == std::end(kSupportedTypes))
    json_field_error(origin, "model_type",
                     "unsupported '" + excerpt(m.model_type) + "'; supported: " + supported_types_text());

  read_sizes(j, origin, m);
  read_attention(j, origin, m);
  read_qk_norm_and_moe_layout(j, origin, m);
  read_experts(j, origin, m);
  read_hybrid_layers(j, origin, m);
  check_parameter_count(origin, m);
  read_quantization_config(j, origin, m);
  read_torch_dtype(j, origin, m);
  return m;
}

std::string known_names_text() {
  std::string out;
  for (const auto& n : model_names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Fine-tunes published beside a base model keep its architecture: its
// instruction- and chat-tuned repositories (Meta's -Instruct, Qwen 2.5's,
// Gemma's -it). Anything else after the id (a release date that changed the
// context, -FP8, -AWQ) is another checkpoint and not read as the base.
constexpr const char* kSameArchitectureSuffixes[] = {"", "-instruct", "-chat", "-it"};

// The bundled descriptor whose Hugging Face id `id` names (case aside), or
// of which it is a fine-tune above; and the nearest one it only starts
// with, for the refusal's suggestion.
struct HfMatch {
  const EmbeddedFile* exact = nullptr;
  const EmbeddedFile* prefix = nullptr;
  std::string prefix_hf_id;
};

HfMatch match_hf_id(const std::string& id) {
  HfMatch out;
  const std::string want = lower(id);
  if (want.find('/') == std::string::npos) return out;
  for (const auto& f : bundled_model_files()) {
    const nlohmann::json j = parse_json_text(std::string(f.text), "bundled model " + std::string(f.name));
    if (!j.contains("hf_id") || !j.at("hf_id").is_string()) continue;
    const std::string hf = j.at("hf_id").get<std::string>();
    for (const char* suffix : kSameArchitectureSuffixes)
      if (want == lower(hf) + suffix) out.exact = &f;
    if (want.rfind(lower(hf), 0) == 0 && hf.size() > out.prefix_hf_id.size()) {
      out.prefix = &f;
      out.prefix_hf_id = hf;
    }
  }
  return out;
}

}  // namespace

const char* qk_norm_name(QkNorm q) {
  switch (q) {
    case QkNorm::none: return "none";
    case QkNorm::per_head: return "per_head";
    case QkNorm::per_layer: return "per_layer";
  }
  return "none";
}

const char* layer_attention_name(LayerAttention a) {
  switch (a) {
    case LayerAttention::full: return "full";
    case LayerAttention::sliding: return "sliding";
    case LayerAttention::chunked: return "chunked";
    case LayerAttention::linear: return "linear";
    case LayerAttention::mamba: return "mamba";
    case LayerAttention::none: return "none";
  }
  return "full";
}

const char* layer_mlp_name(LayerMlp k) {
  switch (k) {
    case LayerMlp::dense: return "dense";
    case LayerMlp::moe: return "moe";
    case LayerMlp::none: return "none";
  }
  return "dense";
}

int64_t ModelDesc::layers_of(LayerAttention kind) const {
  if (layer_attention.empty()) return kind == LayerAttention::full ? num_hidden_layers : 0;
  return std::count(layer_attention.begin(), layer_attention.end(), kind);
}

ModelDesc parse_model_json(const std::string& text, const std::string& origin,
                           const std::string& default_name) {
  return model_from_json(parse_json_text(text, origin), origin, default_name);
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& f : bundled_model_files()) names.emplace_back(f.name);
  std::sort(names.begin(), names.end());
  return names;
}

ModelDesc load_model_file(const std::string& path) {
  // A Hugging Face folder's config.json is named after its folder
  // (meta-llama/Llama-3.1-8B/config.json: "Llama-3.1-8B"), a descriptor after its file.
  const std::filesystem::path p(path);
  const std::filesystem::path folder = p.parent_path().filename();
  const bool hf_config = p.filename() == "config.json" && !folder.empty() && folder != "." && folder != "..";
  return model_from_json(read_json_file(path), path, hf_config ? folder.string() : p.stem().string());
}

ModelDesc resolve_model(const std::string& name_or_path) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(name_or_path, ec)) return load_model_file(name_or_path);
  // A Hugging Face model folder: its config.json, named after the folder.
  const std::filesystem::path dir(name_or_path);
  if (std::filesystem::is_regular_file(dir / "config.json", ec)) {
    const std::string config = (dir / "config.json").string();
    std::string folder = (dir.filename().empty() ? dir.parent_path() : dir).filename().string();
    return model_from_json(read_json_file(config), config, folder);
  }
  for (const auto& f : bundled_model_files())
    if (f.name == name_or_path)
      return parse_model_json(std::string(f.text), "bundled model " + std::string(f.name),
                              std::string(f.name));
  // vLLM's spelling: the Hugging Face repository (meta-llama/Llama-3.1-8B).
  const HfMatch hf = match_hf_id(name_or_path);
  if (hf.exact)
    return parse_model_json(std::string(hf.exact->text), "bundled model " + std::string(hf.exact->name),
                            std::string(hf.exact->name));
  if (hf.prefix) {
    throw UsageError("unknown model '" + excerpt(name_or_path) + "': not bundled, and not read as the bundled " +
                     std::string(hf.prefix->name) + " (" + hf.prefix_hf_id +
                     ") since a checkpoint named beyond it may differ (context, format); give its config.json, or --model " +
                     std::string(hf.prefix->name) + " if it is the same architecture");
  }
  throw UsageError("unknown model '" + excerpt(name_or_path) +
                   "' (not a bundled name, a bundled model's Hugging Face id, or a file); known models: " +
                   known_names_text());
}

}  // namespace twin
