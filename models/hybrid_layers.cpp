#include "models/hybrid_layers.hpp"

#include <string>

#include "base/error.hpp"
#include "models/model_math.hpp"

namespace twin {

namespace {
// The chunk of the chunked delta-rule kernel vLLM runs for Gated DeltaNet
// prefill (fla's chunk_gated_delta_rule: 64-token chunks).
constexpr int64_t kGdnChunk = 64;
// Mamba-2's chunk when the config names none (transformers' default).
constexpr int64_t kMambaDefaultChunk = 256;
}  // namespace

LayerAttention mixer_of(const ModelDesc& m, int64_t layer) {
  if (m.layer_attention.empty()) return LayerAttention::full;
  return m.layer_attention[static_cast<std::size_t>(layer)];
}

LayerMlp mlp_of(const ModelDesc& m, int64_t layer) {
  if (!m.layer_mlp.empty()) return m.layer_mlp[static_cast<std::size_t>(layer)];
  return m.is_moe() && layer >= m.first_k_dense_replace ? LayerMlp::moe : LayerMlp::dense;
}

LayerCounts count_layers(const ModelDesc& m, int64_t first, int64_t count) {
  LayerCounts c;
  for (int64_t i = first; i < first + count; ++i) {
    switch (mixer_of(m, i)) {
      case LayerAttention::full: ++c.full; break;
      case LayerAttention::sliding:
      case LayerAttention::chunked: ++c.local; break;
      case LayerAttention::linear: ++c.linear; break;
      case LayerAttention::mamba: ++c.mamba; break;
      case LayerAttention::none: ++c.no_mixer; break;
    }
    switch (mlp_of(m, i)) {
      case LayerMlp::dense: ++c.dense; break;
      case LayerMlp::moe: ++c.moe; break;
      case LayerMlp::none: ++c.no_mlp; break;
    }
  }
  return c;
}

MixerShape mixer_shape(const ModelDesc& m, LayerAttention kind, int tp) {
  MixerShape s;
  if (kind == LayerAttention::linear) {
    const int64_t key_dim = m.linear_num_key_heads * m.linear_key_head_dim / tp;
    const int64_t value_dim = m.linear_num_value_heads * m.linear_value_head_dim / tp;
    s.heads = m.linear_num_value_heads / tp;
    s.in_n = 2 * key_dim + 2 * value_dim + 2 * s.heads;
    s.out_k = value_dim;
    s.conv_dim = 2 * key_dim + value_dim;
    s.conv_kernel = m.linear_conv_kernel_dim;
    s.state_rows = m.linear_key_head_dim;
    s.state_cols = m.linear_value_head_dim;
    s.small_params = 2 * s.heads + m.linear_value_head_dim;  // dt_bias, A_log; the norm's weight (per head width)
    s.chunk = kGdnChunk;
  } else if (kind == LayerAttention::mamba) {
    const int64_t inner = m.mamba_num_heads * m.mamba_head_dim / tp;
    const int64_t groups = m.mamba_n_groups % tp == 0 ? m.mamba_n_groups / tp : 1;
    s.heads = m.mamba_num_heads / tp;
    s.in_n = 2 * inner + 2 * groups * m.ssm_state_size + s.heads;
    s.out_k = inner;
    s.conv_dim = inner + 2 * groups * m.ssm_state_size;
    s.conv_kernel = m.mamba_conv_kernel;
    s.state_rows = m.mamba_head_dim;
    s.state_cols = m.ssm_state_size;
    s.small_params = 3 * s.heads + inner + s.conv_dim;  // dt_bias, A, D; the norm; the conv bias
    s.chunk = m.mamba_chunk_size > 0 ? m.mamba_chunk_size : kMambaDefaultChunk;
  }
  return s;
}

int64_t state_bytes_per_request_per_gpu(const ModelDesc& m, Dtype dtype, const ParallelLayout& layout, int pp_stage) {
  const LayerCounts c = count_layers(m, stage_first_layer(m, layout.pp, pp_stage), stage_layers(m, layout.pp, pp_stage));
  int64_t elems = 0;
  if (c.linear > 0) {
    const MixerShape s = mixer_shape(m, LayerAttention::linear, layout.tp);
    elems += c.linear * (s.state_elems() + s.conv_state_elems());
  }
  if (c.mamba > 0) {
    const MixerShape s = mixer_shape(m, LayerAttention::mamba, layout.tp);
    elems += c.mamba * (s.state_elems() + s.conv_state_elems());
  }
  return elems * dtype_bytes(dtype);
}

int64_t state_bytes_per_request(const ModelDesc& m, Dtype dtype) {
  return state_bytes_per_request_per_gpu(m, dtype, ParallelLayout{}, 0);
}

void check_mixer_layout(const ModelDesc& m, int tp) {
  const LayerCounts c = count_layers(m, 0, m.num_hidden_layers);
  const std::string who = "model " + m.name + ": tp=" + std::to_string(tp) + " does not divide ";
  if (c.linear > 0) {
    if (m.linear_num_value_heads % tp != 0)
      throw UsageError(who + "linear_num_value_heads=" + std::to_string(m.linear_num_value_heads));
    if (m.linear_num_key_heads % tp != 0)
      throw UsageError(who + "linear_num_key_heads=" + std::to_string(m.linear_num_key_heads));
  }
  if (c.mamba > 0 && m.mamba_num_heads % tp != 0)
    throw UsageError(who + "mamba_num_heads=" + std::to_string(m.mamba_num_heads));
}

}  // namespace twin
