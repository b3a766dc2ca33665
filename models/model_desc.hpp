#pragma once
// A transformer's shape, with the Hugging Face config.json field names, so a
// user can point us at their model's config.json. Decoder-only, Llama-style
// blocks (RMSNorm, rotary, gated SiLU MLP); Mixtral-style MoE when
// num_local_experts > 0, with DeepSeek-style shared experts, expert width
// and leading dense layers where the config has them (the simulator prices
// them; the engine runs Mixtral-style MoE only). Qwen3 and MiniMax-M2 add
// an RMSNorm of the queries and keys before the rotary embedding (QkNorm).
#include <cstdint>
#include <string>
#include <vector>

#include "models/dtype.hpp"

namespace twin {

// Hugging Face's rope_scaling: how a long-context checkpoint stretches its
// rotary frequencies. The simulator does not need it; the engine applies
// "linear" and "llama3" and refuses the others (a wrong rotation would be
// silently wrong text).
struct RopeScalingDesc {
  std::string type;  // "" when absent, null or "default"; else HF's rope_type ("linear", "llama3", "yarn", ...)
  double factor = 1.0;
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3
  int64_t original_max_position_embeddings = 0;  // llama3 (and others that carry it)
};

// An RMSNorm of Q and K between the QKV projection and the rotary
// embedding. per_head (Qwen3, qwen3_moe): each head's head_dim values
// normalised on their own, one weight vector of head_dim shared by the
// heads (q_norm and k_norm). per_layer (MiniMax-M2's qk_norm_type
// "per_layer"): all the heads' values of a token normalised together, a
// weight per value; under TP the sum of squares is all-reduced (vLLM's
// MiniMaxText01RMSNormTP).
enum class QkNorm { none, per_head, per_layer };
// "none", "per_head", "per_layer" (MiniMax-M2's qk_norm_type spelling).
const char* qk_norm_name(QkNorm q);

// How one layer attends. full: every earlier token (or ModelDesc's
// sliding_window when the model has one window for all layers); sliding: the
// model's sliding_window tokens; chunked: the tokens of its own
// attention_chunk_size chunk (Llama 4's local layers). The hybrid models'
// other token mixers (issue 41): linear, a Gated DeltaNet linear-attention
// layer (Qwen3-Next's "linear_attention") with a fixed-size state per
// request; mamba, a Mamba-2 layer (Nemotron-H's "M") likewise; none, a
// layer with no token mixer (Nemotron-H's "-" MLP layers).
enum class LayerAttention : std::uint8_t { full, sliding, chunked, linear, mamba, none };
const char* layer_attention_name(LayerAttention a);
// The kinds that cache keys and values per token (full, sliding, chunked).
constexpr bool is_kv_attention(LayerAttention a) {
  return a == LayerAttention::full || a == LayerAttention::sliding || a == LayerAttention::chunked;
}
// The kinds that hold a fixed-size state per request (linear, mamba).
constexpr bool is_state_mixer(LayerAttention a) { return a == LayerAttention::linear || a == LayerAttention::mamba; }

// A layer's feed-forward part: a dense MLP of intermediate_size, the
// experts (with the shared ones), or none (Nemotron-H's mixer-only layers).
enum class LayerMlp : std::uint8_t { dense, moe, none };
const char* layer_mlp_name(LayerMlp k);

struct ModelDesc {
  std::string name;        // our name, e.g. "llama-2-7b"
  // The Hugging Face repository of the published weights ("hf_id" in a
  // descriptor, "_name_or_path" in a config.json); empty when unknown. For
  // the `vllm serve` line `plan` prints.
  std::string hf_id;
  std::string model_type;  // llama, mistral, mixtral, qwen2, qwen3, qwen3_moe, minimax_m2, deepseek_v3
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;  // per expert for MoE
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // default: num_attention_heads
  int64_t head_dim = 0;             // default: hidden_size / num_attention_heads
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScalingDesc rope_scaling;
  int64_t sliding_window = 0;  // 0: full attention; else a token sees itself and the window - 1 tokens before it
  bool tie_word_embeddings = false;
  bool attention_bias = false;    // Q, K, V projections carry a bias (Qwen2)
  bool mlp_bias = false;          // MLP projections carry biases (the engine refuses them)
  QkNorm qk_norm = QkNorm::none;  // Qwen3: per_head; MiniMax-M2: per_layer
  std::string hidden_act = "silu";  // the MLP's activation (the engine runs silu only)
  int64_t num_local_experts = 0;  // 0: dense MLP (DeepSeek's configs: n_routed_experts)
  int64_t num_experts_per_tok = 0;
  // DeepSeek-V2/V3: each expert's width (0: intermediate_size), experts
  // every token runs beside its routed ones, and the first layers' dense
  // MLPs of intermediate_size in place of experts.
  int64_t moe_intermediate_size = 0;
  int64_t n_shared_experts = 0;
  int64_t first_k_dense_replace = 0;
  Dtype torch_dtype = Dtype::bf16;  // the dtype the checkpoint is published in
  // --- issue 41 (hw helper): a quantised checkpoint ---
  // config.json's quantization_config as our --quantization name ("mxfp4",
  // "nvfp4", "fp8", ...); "" for an unquantised checkpoint. vLLM takes the
  // checkpoint's method and refuses a --quantization that differs.
  std::string quantization;

  // --- Attention kinds beyond grouped-query attention (issue 41) ---
  // Multi-head latent attention (DeepSeek-V2/V3, Kimi K2: kv_lora_rank > 0).
  // Each token caches one latent vector of kv_lora_rank plus a shared rotary
  // key of qk_rope_head_dim per layer, whatever the heads or TP degree (vLLM
  // caches it as one 576-wide "head", replicated on every TP rank). Queries
  // are projected down to q_lora_rank (0: straight from the hidden state),
  // then up to heads x (qk_nope_head_dim + qk_rope_head_dim); keys and values
  // are the latent projected up to qk_nope_head_dim and v_head_dim per head.
  // For an MLA model head_dim is qk_nope + qk_rope (the query/key width) and
  // num_key_value_heads equals num_attention_heads (as the configs say).
  int64_t kv_lora_rank = 0;
  int64_t q_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  bool is_mla() const { return kv_lora_rank > 0; }
  // Values one token caches per MLA layer: the latent and the rotary key.
  int64_t mla_cache_dim() const { return kv_lora_rank + qk_rope_head_dim; }
  // Per-layer attention (GPT-OSS, Gemma 3, Llama 4): empty means every layer
  // attends as sliding_window says; else one entry per layer.
  std::vector<LayerAttention> layer_attention;
  int64_t attention_chunk_size = 0;  // chunked layers (Llama 4): a query sees its own chunk only
  bool attention_sinks = false;      // GPT-OSS: a learned per-head sink logit in the softmax
  // Layers of each kind (all of them full or windowed when layer_attention is empty).
  int64_t layers_of(LayerAttention kind) const;
  // --- end of the attention kinds block ---

  // --- Hybrid models (issue 41, s50-hyb): per-layer MLPs, linear attention, Mamba-2 ---
  // Per-layer feed-forward kinds (Llama 4's interleaved MoE, Nemotron-H's
  // pattern): empty means a MoE model's first first_k_dense_replace layers
  // are dense and the rest MoE (a dense model: all dense); else one per layer.
  std::vector<LayerMlp> layer_mlp;
  bool mlp_gated = true;          // false: up and down projections only (Nemotron-H's relu2)
  bool attn_output_gate = false;  // Qwen3-Next: q_proj also puts out a sigmoid gate per query value
  // Gated DeltaNet (linear layers), Qwen3-Next's config names: key heads
  // (queries share them) and value heads, their widths, the causal
  // convolution's kernel over q, k and v. State per layer: value heads x
  // key_head_dim x value_head_dim, plus the convolution's last kernel - 1 inputs.
  int64_t linear_num_key_heads = 0;
  int64_t linear_num_value_heads = 0;
  int64_t linear_key_head_dim = 0;
  int64_t linear_value_head_dim = 0;
  int64_t linear_conv_kernel_dim = 0;
  // Mamba-2 (mamba layers), Nemotron-H's config names: heads of
  // mamba_head_dim (inner width heads x head_dim), the SSM state per head
  // row, the B/C groups, the convolution kernel, and the chunk of the
  // chunked scan prefill runs (SSD).
  int64_t mamba_num_heads = 0;
  int64_t mamba_head_dim = 0;
  int64_t ssm_state_size = 0;
  int64_t mamba_n_groups = 0;
  int64_t mamba_conv_kernel = 0;
  int64_t mamba_chunk_size = 0;
  // Where this block's derived figures live: models/hybrid_layers.hpp.
  // --- end of the hybrid models block ---

  bool is_moe() const { return num_local_experts > 0; }
  int64_t expert_intermediate_size() const { return moe_intermediate_size > 0 ? moe_intermediate_size : intermediate_size; }
  // Layers with a dense MLP: all of a dense model's, a MoE model's first k.
  int64_t dense_layers() const { return is_moe() ? first_k_dense_replace : num_hidden_layers; }
  int64_t q_dim() const { return num_attention_heads * head_dim; }
  int64_t kv_dim() const { return num_key_value_heads * head_dim; }
  bool has_qk_norm() const { return qk_norm != QkNorm::none; }
};

// Names of the bundled descriptors, sorted.
std::vector<std::string> model_names();

// A path to an existing file loads that file; a folder holding a config.json
// (a Hugging Face model folder) loads that, named after the folder; otherwise
// a bundled name; otherwise UsageError listing the bundled names.
ModelDesc resolve_model(const std::string& name_or_path);

// Loads a config.json. The name is its "name" key, else the file's stem.
// Unknown keys are ignored (HF configs carry many); a missing required key or
// a bad value is twin::Error naming the file and the key.
ModelDesc load_model_file(const std::string& path);

// Parses descriptor JSON text; `origin` names it in errors, `default_name` is
// used when there is no "name" key.
ModelDesc parse_model_json(const std::string& text, const std::string& origin,
                           const std::string& default_name);

}  // namespace twin
