#include "models/model_math.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/error.hpp"
#include "models/hybrid_layers.hpp"

namespace twin {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The q/k norm weights on one GPU: per head, head_dim each for q and k
// (replicated); per layer, one per value of the GPU's heads (sharded with them).
int64_t qk_norm_params(const ModelDesc& m, int64_t q, int64_t kv) {
  return m.qk_norm == QkNorm::per_head ? 2 * m.head_dim : m.qk_norm == QkNorm::per_layer ? q + kv : 0;
}

// Multi-head latent attention's weights on one GPU of a TP group, as vLLM
// shards them (DeepseekV2MLAAttention): the down-projections of the hidden
// state to the query latent and to the KV latent plus rotary key
// (fused_qkv_a_proj, replicated) and their RMSNorms, replicated; the query
// up-projection q_b_proj (or q_proj without a query latent), the KV
// up-projection kv_b_proj and o_proj split by heads.
struct MlaWeights {
  int64_t replicated_n = 0, replicated_k = 0;  // fused_qkv_a_proj (or kv_a_proj_with_mqa): n x k
  int64_t q_up_n = 0, q_up_k = 0;              // q_b_proj (q_proj): n x k, this GPU's heads
  int64_t kv_up_n = 0, kv_up_k = 0;            // kv_b_proj
  int64_t o_n = 0, o_k = 0;                    // o_proj
  int64_t norms = 0;                           // q_a_layernorm, kv_a_layernorm
  int64_t linear_params() const {
    return replicated_n * replicated_k + q_up_n * q_up_k + kv_up_n * kv_up_k + o_n * o_k;
  }
};
MlaWeights mla_weights(const ModelDesc& m, int tp) {
  const int64_t heads = q_heads_per_gpu(m, tp);
  MlaWeights w;
  w.replicated_n = m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim;
  w.replicated_k = m.hidden_size;
  w.q_up_n = heads * m.head_dim;
  w.q_up_k = m.q_lora_rank > 0 ? m.q_lora_rank : m.hidden_size;
  w.kv_up_n = heads * (m.qk_nope_head_dim + m.v_head_dim);
  w.kv_up_k = m.kv_lora_rank;
  w.o_n = m.hidden_size;
  w.o_k = heads * m.v_head_dim;
  w.norms = m.q_lora_rank + m.kv_lora_rank;
  return w;
}

// The two RMSNorms of a layer with a mixer and an MLP; one for a layer with
// only one of them (Nemotron-H's blocks).
int64_t layer_norm_params(const ModelDesc& m, LayerAttention mixer, LayerMlp mlp) {
  return (mixer == LayerAttention::none || mlp == LayerMlp::none) ? m.hidden_size : 2 * m.hidden_size;
}

// The query projection's outputs: the heads, and Qwen3-Next's output gate as many again.
int64_t q_proj_width(const ModelDesc& m, int64_t q) { return m.attn_output_gate ? 2 * q : q; }

// Parameters of one layer, split over `tp` GPUs (tp = 1: the whole layer).
// Norm weights are replicated on every GPU. `active_experts` < 0: all the
// experts on the GPU (num_local_experts / ep).
int64_t layer_params(const ModelDesc& m, int tp, int64_t active_experts, int ep, LayerAttention mixer, LayerMlp mlp_kind) {
  const int64_t h = m.hidden_size;
  const int64_t q = q_heads_per_gpu(m, tp) * m.head_dim;
  const int64_t kv = kv_heads_per_gpu(m, tp) * m.head_dim;
  int64_t attn = h * (q_proj_width(m, q) + 2 * kv) + q * h + qk_norm_params(m, q, kv);
  if (m.attention_bias) attn += q + 2 * kv;
  if (m.is_mla()) {
    const MlaWeights w = mla_weights(m, tp);
    attn = w.linear_params() + w.norms;
  }
  if (is_state_mixer(mixer)) {
    const MixerShape s = mixer_shape(m, mixer, tp);
    attn = s.linear_params(h) + s.small_params;
  } else if (mixer == LayerAttention::none) {
    attn = 0;
  }
  int64_t mlp = (m.mlp_gated ? 3 : 2) * h * (m.intermediate_size / tp);
  if (mlp_kind == LayerMlp::moe) {
    const int64_t expert_one = 3 * h * (m.expert_intermediate_size() / tp);
    const int64_t experts = active_experts < 0 ? m.num_local_experts / ep : active_experts;
    // Shared experts run on every rank; the router is replicated.
    mlp = (experts + m.n_shared_experts) * expert_one + h * m.num_local_experts;
  } else if (mlp_kind == LayerMlp::none) {
    mlp = 0;
  }
  return attn + mlp + layer_norm_params(m, mixer, mlp_kind);
}

// Bytes of one layer's weights at a precision, split as layer_params: the
// projections and experts in the linear format, bias, router and norms
// unquantised.
double layer_bytes(const ModelDesc& m, int tp, const WeightPrecision& precision, int ep, LayerAttention mixer,
                   LayerMlp mlp_kind) {
  // An experts-only format (mxfp4) quantises the routed experts alone.
  const WeightPrecision p = precision.for_linear(false), experts = precision.for_linear(true);
  const int64_t h = m.hidden_size;
  const int64_t q = q_heads_per_gpu(m, tp) * m.head_dim;
  const int64_t kv = kv_heads_per_gpu(m, tp) * m.head_dim;
  const int64_t inter = m.intermediate_size / tp;
  int64_t dense = layer_norm_params(m, mixer, mlp_kind) + qk_norm_params(m, q, kv);
  if (m.attention_bias) dense += q + 2 * kv;
  double linear = p.linear_bytes(q_proj_width(m, q) + 2 * kv, h) + p.linear_bytes(h, q);
  if (m.is_mla()) {
    const MlaWeights w = mla_weights(m, tp);
    dense = 2 * h + w.norms;
    linear = p.linear_bytes(w.replicated_n, w.replicated_k) + p.linear_bytes(w.q_up_n, w.q_up_k) +
             p.linear_bytes(w.kv_up_n, w.kv_up_k) + p.linear_bytes(w.o_n, w.o_k);
  }
  if (is_state_mixer(mixer)) {
    // The convolution's weights are small and stay unquantised (vLLM's conv1d is not a quantised linear).
    const MixerShape s = mixer_shape(m, mixer, tp);
    dense = layer_norm_params(m, mixer, mlp_kind) + s.small_params + s.conv_dim * s.conv_kernel;
    linear = p.linear_bytes(s.in_n, h) + p.linear_bytes(h, s.out_k);
  } else if (mixer == LayerAttention::none) {
    dense = layer_norm_params(m, mixer, mlp_kind);
    linear = 0;
  }
  if (mlp_kind == LayerMlp::moe) {
    const int64_t e_inter = m.expert_intermediate_size() / tp;
    const double expert_one = experts.linear_bytes(2 * e_inter, h) + experts.linear_bytes(h, e_inter);
    const double shared_one = p.linear_bytes(2 * e_inter, h) + p.linear_bytes(h, e_inter);
    linear += static_cast<double>(m.num_local_experts / ep) * expert_one +
              static_cast<double>(m.n_shared_experts) * shared_one;
    dense += h * m.num_local_experts;
  } else if (mlp_kind == LayerMlp::dense) {
    linear += p.linear_bytes((m.mlp_gated ? 2 : 1) * inter, h) + p.linear_bytes(h, inter);
  }
  return linear + static_cast<double>(dense) * p.dense_bytes();
}

// Whole bytes: exact for unquantised weights, scales' fractions rounded up.
int64_t whole_bytes(double bytes) { return static_cast<int64_t>(std::ceil(bytes)); }

// Parameters of `layers` layers starting at layer `first`, each of its own
// mixer and MLP kind (runs of equal layers priced once).
int64_t layers_params(const ModelDesc& m, int64_t first, int64_t layers, int tp, int64_t active_experts, int ep) {
  int64_t total = 0;
  for (int64_t i = first; i < first + layers;) {
    const LayerAttention mixer = mixer_of(m, i);
    const LayerMlp mlp = mlp_of(m, i);
    int64_t run = 1;
    while (i + run < first + layers && mixer_of(m, i + run) == mixer && mlp_of(m, i + run) == mlp) ++run;
    total += run * layer_params(m, tp, active_experts, ep, mixer, mlp);
    i += run;
  }
  return total;
}

double layers_bytes(const ModelDesc& m, int64_t first, int64_t layers, int tp, const WeightPrecision& p, int ep) {
  double total = 0;
  for (int64_t i = first; i < first + layers;) {
    const LayerAttention mixer = mixer_of(m, i);
    const LayerMlp mlp = mlp_of(m, i);
    int64_t run = 1;
    while (i + run < first + layers && mixer_of(m, i + run) == mixer && mlp_of(m, i + run) == mlp) ++run;
    total += static_cast<double>(run) * layer_bytes(m, tp, p, ep, mixer, mlp);
    i += run;
  }
  return total;
}

}  // namespace

int64_t param_count(const ModelDesc& m) {
  const int64_t emb = m.vocab_size * m.hidden_size;
  return emb * (m.tie_word_embeddings ? 1 : 2) + layers_params(m, 0, m.num_hidden_layers, 1, -1, 1) + m.hidden_size;
}

int64_t active_param_count(const ModelDesc& m) {
  if (!m.is_moe()) return param_count(m);
  const int64_t emb = m.vocab_size * m.hidden_size;
  return emb * (m.tie_word_embeddings ? 1 : 2) + layers_params(m, 0, m.num_hidden_layers, 1, m.num_experts_per_tok, 1) +
         m.hidden_size;
}

int64_t weight_bytes(const ModelDesc& m, const WeightPrecision& weights) {
  if (!weights.quantized()) return param_count(m) * dtype_bytes(weights.dtype);
  const int64_t emb = m.vocab_size * m.hidden_size;
  const int64_t dense = emb * (m.tie_word_embeddings ? 1 : 2) + m.hidden_size;
  return whole_bytes(layers_bytes(m, 0, m.num_hidden_layers, 1, weights, 1) +
                     static_cast<double>(dense) * weights.dense_bytes());
}

int64_t kv_bytes_per_token(const ModelDesc& m, Dtype kv) {
  // Only the layers that attend cache keys and values (a hybrid model's
  // linear-attention and Mamba layers hold a state per request instead).
  const int64_t layers = count_layers(m, 0, m.num_hidden_layers).kv();
  if (m.is_mla()) return layers * m.mla_cache_dim() * dtype_bytes(kv);
  return 2 * layers * m.num_key_value_heads * m.head_dim * dtype_bytes(kv);
}

int64_t kv_bytes_per_request(const ModelDesc& m, Dtype kv, int64_t tokens) {
  tokens = std::max<int64_t>(tokens, 0);
  if (m.layer_attention.empty()) return tokens * kv_bytes_per_token(m, kv);
  const int64_t kv_layers = count_layers(m, 0, m.num_hidden_layers).kv();
  if (kv_layers == 0) return 0;
  const int64_t per_layer = kv_bytes_per_token(m, kv) / kv_layers;
  const int64_t sliding = std::min(tokens, m.sliding_window);
  const int64_t chunked = m.attention_chunk_size > 0 ? (tokens - 1) % m.attention_chunk_size + 1 : tokens;
  return per_layer * (m.layers_of(LayerAttention::full) * tokens + m.layers_of(LayerAttention::sliding) * sliding +
                      m.layers_of(LayerAttention::chunked) * (tokens > 0 ? chunked : 0));
}

void check_layout(const ModelDesc& m, const ParallelLayout& layout) {
  const std::string who = "model " + m.name + ": ";
  const int tp = layout.tp, pp = layout.pp;
  if (tp < 1) throw UsageError(who + "tensor parallel size must be >= 1, got " + std::to_string(tp));
  if (pp < 1) throw UsageError(who + "pipeline parallel size must be >= 1, got " + std::to_string(pp));
  if (m.num_attention_heads % tp != 0)
    throw UsageError(who + "tp=" + std::to_string(tp) + " does not divide num_attention_heads=" +
                     std::to_string(m.num_attention_heads));
  const int64_t kvh = m.num_key_value_heads;
  if (kvh % tp != 0 && tp % kvh != 0)
    throw UsageError(who + "tp=" + std::to_string(tp) + " neither divides num_key_value_heads=" +
                     std::to_string(kvh) + " nor is a multiple of it");
  check_mixer_layout(m, tp);
  if (m.intermediate_size % tp != 0)
    throw UsageError(who + "tp=" + std::to_string(tp) + " does not divide intermediate_size=" +
                     std::to_string(m.intermediate_size));
  if (m.is_moe() && m.expert_intermediate_size() % tp != 0)
    throw UsageError(who + "tp=" + std::to_string(tp) + " does not divide moe_intermediate_size=" +
                     std::to_string(m.expert_intermediate_size()));
  if (pp > m.num_hidden_layers)
    throw UsageError(who + "pp=" + std::to_string(pp) + " exceeds num_hidden_layers=" +
                     std::to_string(m.num_hidden_layers));
  const int ep = layout.ep;
  if (ep < 1) throw UsageError(who + "expert parallel size must be >= 1, got " + std::to_string(ep));
  if (ep > 1 && !m.is_moe())
    throw UsageError(who + "ep=" + std::to_string(ep) + ": expert parallelism needs a mixture-of-experts model");
  if (ep > 1 && m.num_local_experts % ep != 0)
    throw UsageError(who + "ep=" + std::to_string(ep) + " does not divide the " + std::to_string(m.num_local_experts) +
                     " experts");
  const double share = layout.expert_busiest_share;
  if (share != 0 && !(share >= 1.0 / ep - 1e-12 && share <= 1.0))
    throw UsageError(who + "expert_busiest_share must be 0 (uniform) or from 1/ep = " + std::to_string(1.0 / ep) +
                     " to 1, got " + std::to_string(share));
}

int64_t stage_layers(const ModelDesc& m, int pp, int pp_stage) {
  const int64_t base = m.num_hidden_layers / pp, extra = m.num_hidden_layers % pp;
  return base + (pp_stage < extra ? 1 : 0);
}

int64_t stage_first_layer(const ModelDesc& m, int pp, int pp_stage) {
  const int64_t base = m.num_hidden_layers / pp, extra = m.num_hidden_layers % pp;
  return pp_stage * base + std::min<int64_t>(pp_stage, extra);
}

int64_t stage_dense_layers(const ModelDesc& m, int pp, int pp_stage) {
  return count_layers(m, stage_first_layer(m, pp, pp_stage), stage_layers(m, pp, pp_stage)).dense;
}

int64_t q_heads_per_gpu(const ModelDesc& m, int tp) { return m.num_attention_heads / tp; }

int64_t kv_heads_per_gpu(const ModelDesc& m, int tp) {
  return m.num_key_value_heads >= tp ? m.num_key_value_heads / tp : 1;
}

int64_t kv_bytes_per_token_per_gpu(const ModelDesc& m, Dtype kv, const ParallelLayout& layout,
                                   int pp_stage) {
  const int64_t layers =
      count_layers(m, stage_first_layer(m, layout.pp, pp_stage), stage_layers(m, layout.pp, pp_stage)).kv();
  // The latent is not split by heads: every TP rank caches all of it.
  if (m.is_mla()) return layers * m.mla_cache_dim() * dtype_bytes(kv);
  return 2 * layers * kv_heads_per_gpu(m, layout.tp) * m.head_dim * dtype_bytes(kv);
}

int64_t weight_bytes_per_gpu(const ModelDesc& m, const WeightPrecision& weights, const ParallelLayout& layout,
                             int pp_stage) {
  const int64_t layers = stage_layers(m, layout.pp, pp_stage);
  const int64_t first_layer = stage_first_layer(m, layout.pp, pp_stage);
  int64_t params = weights.quantized() ? 0 : layers_params(m, first_layer, layers, layout.tp, -1, layout.ep);
  const int64_t vocab_shard = ceil_div(m.vocab_size, layout.tp) * m.hidden_size;
  const bool first = pp_stage == 0, last = pp_stage == layout.pp - 1;
  if (first) params += vocab_shard;
  // Tied weights on a single stage share one copy; across stages the last
  // stage holds its own copy.
  if (last) params += m.hidden_size + ((m.tie_word_embeddings && first) ? 0 : vocab_shard);
  if (!weights.quantized()) return params * dtype_bytes(weights.dtype);
  return whole_bytes(layers_bytes(m, first_layer, layers, layout.tp, weights, layout.ep) +
                     static_cast<double>(params) * weights.dense_bytes());
}

}  // namespace twin
