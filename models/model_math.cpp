#include "models/model_math.hpp"

#include <cmath>
#include <string>

#include "base/error.hpp"

namespace twin {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Parameters of one layer, split over `tp` GPUs (tp = 1: the whole layer).
// Norm weights are replicated on every GPU. `active_experts` < 0: all.
int64_t layer_params(const ModelDesc& m, int tp, int64_t active_experts) {
  const int64_t h = m.hidden_size;
  const int64_t q = q_heads_per_gpu(m, tp) * m.head_dim;
  const int64_t kv = kv_heads_per_gpu(m, tp) * m.head_dim;
  int64_t attn = h * (q + 2 * kv) + q * h;
  if (m.attention_bias) attn += q + 2 * kv;
  const int64_t mlp_one = 3 * h * (m.intermediate_size / tp);
  int64_t mlp = mlp_one;
  if (m.is_moe()) {
    const int64_t experts = active_experts < 0 ? m.num_local_experts : active_experts;
    mlp = experts * mlp_one + h * m.num_local_experts;  // router is replicated
  }
  return attn + mlp + 2 * h;
}

// Bytes of one layer's weights at a precision, split as layer_params: the
// projections and experts in the linear format, bias, router and norms
// unquantised.
double layer_bytes(const ModelDesc& m, int tp, const WeightPrecision& p) {
  const int64_t h = m.hidden_size;
  const int64_t q = q_heads_per_gpu(m, tp) * m.head_dim;
  const int64_t kv = kv_heads_per_gpu(m, tp) * m.head_dim;
  const int64_t inter = m.intermediate_size / tp;
  int64_t dense = 2 * h;
  if (m.attention_bias) dense += q + 2 * kv;
  double linear = p.linear_bytes(q + 2 * kv, h) + p.linear_bytes(h, q);
  const double mlp_one = p.linear_bytes(2 * inter, h) + p.linear_bytes(h, inter);
  if (m.is_moe()) {
    linear += static_cast<double>(m.num_local_experts) * mlp_one;
    dense += h * m.num_local_experts;
  } else {
    linear += mlp_one;
  }
  return linear + static_cast<double>(dense) * p.dense_bytes();
}

// Whole bytes: exact for unquantised weights, scales' fractions rounded up.
int64_t whole_bytes(double bytes) { return static_cast<int64_t>(std::ceil(bytes)); }

}  // namespace

int64_t param_count(const ModelDesc& m) {
  const int64_t emb = m.vocab_size * m.hidden_size;
  return emb * (m.tie_word_embeddings ? 1 : 2) + m.num_hidden_layers * layer_params(m, 1, -1) +
         m.hidden_size;
}

int64_t active_param_count(const ModelDesc& m) {
  if (!m.is_moe()) return param_count(m);
  const int64_t emb = m.vocab_size * m.hidden_size;
  return emb * (m.tie_word_embeddings ? 1 : 2) +
         m.num_hidden_layers * layer_params(m, 1, m.num_experts_per_tok) + m.hidden_size;
}

int64_t weight_bytes(const ModelDesc& m, const WeightPrecision& weights) {
  if (!weights.quantized()) return param_count(m) * dtype_bytes(weights.dtype);
  const int64_t emb = m.vocab_size * m.hidden_size;
  const int64_t dense = emb * (m.tie_word_embeddings ? 1 : 2) + m.hidden_size;
  return whole_bytes(static_cast<double>(m.num_hidden_layers) * layer_bytes(m, 1, weights) +
                     static_cast<double>(dense) * weights.dense_bytes());
}

int64_t kv_bytes_per_token(const ModelDesc& m, Dtype kv) {
  return 2 * m.num_hidden_layers * m.num_key_value_heads * m.head_dim * dtype_bytes(kv);
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
  if (m.intermediate_size % tp != 0)
    throw UsageError(who + "tp=" + std::to_string(tp) + " does not divide intermediate_size=" +
                     std::to_string(m.intermediate_size));
  if (pp > m.num_hidden_layers)
    throw UsageError(who + "pp=" + std::to_string(pp) + " exceeds num_hidden_layers=" +
                     std::to_string(m.num_hidden_layers));
}

int64_t stage_layers(const ModelDesc& m, int pp, int pp_stage) {
  const int64_t base = m.num_hidden_layers / pp, extra = m.num_hidden_layers % pp;
  return base + (pp_stage < extra ? 1 : 0);
}

int64_t q_heads_per_gpu(const ModelDesc& m, int tp) { return m.num_attention_heads / tp; }

int64_t kv_heads_per_gpu(const ModelDesc& m, int tp) {
  return m.num_key_value_heads >= tp ? m.num_key_value_heads / tp : 1;
}

int64_t kv_bytes_per_token_per_gpu(const ModelDesc& m, Dtype kv, const ParallelLayout& layout,
                                   int pp_stage) {
  return 2 * stage_layers(m, layout.pp, pp_stage) * kv_heads_per_gpu(m, layout.tp) * m.head_dim *
         dtype_bytes(kv);
}

int64_t weight_bytes_per_gpu(const ModelDesc& m, const WeightPrecision& weights, const ParallelLayout& layout,
                             int pp_stage) {
  const int64_t layers = stage_layers(m, layout.pp, pp_stage);
  int64_t params = weights.quantized() ? 0 : layers * layer_params(m, layout.tp, -1);
  const int64_t vocab_shard = ceil_div(m.vocab_size, layout.tp) * m.hidden_size;
  const bool first = pp_stage == 0, last = pp_stage == layout.pp - 1;
  if (first) params += vocab_shard;
  // Tied weights on a single stage share one copy; across stages the last
  // stage holds its own copy.
  if (last) params += m.hidden_size + ((m.tie_word_embeddings && first) ? 0 : vocab_shard);
  if (!weights.quantized()) return params * dtype_bytes(weights.dtype);
  return whole_bytes(static_cast<double>(layers) * layer_bytes(m, layout.tp, weights) +
                     static_cast<double>(params) * weights.dense_bytes());
}

}  // namespace twin
