#pragma once
// Per-layer figures of hybrid models (issue 41): which token mixer and which
// feed-forward part each layer has, how many of each a range of layers (a
// pipeline stage) holds, and the two fixed-state mixers' shapes: the state a
// Gated DeltaNet (linear attention) or Mamba-2 layer keeps per request, and
// its projections, as vLLM shards them over a TP group.
#include <cstdint>

#include "models/dtype.hpp"
#include "models/model_desc.hpp"

namespace twin {

struct ParallelLayout;

// Layer `layer`'s mixer: layer_attention's entry, or full when it is empty.
LayerAttention mixer_of(const ModelDesc& m, int64_t layer);
// Layer `layer`'s feed-forward part: layer_mlp's entry, else a MoE model's
// first first_k_dense_replace layers dense and the rest moe, a dense model's dense.
LayerMlp mlp_of(const ModelDesc& m, int64_t layer);

// Layers of each kind among `count` layers from `first`.
struct LayerCounts {
  int64_t full = 0, local = 0, linear = 0, mamba = 0, no_mixer = 0;  // local: sliding or chunked
  int64_t dense = 0, moe = 0, no_mlp = 0;
  int64_t kv() const { return full + local; }  // layers that cache keys and values per token
  int64_t attention() const { return full + local; }
};
LayerCounts count_layers(const ModelDesc& m, int64_t first, int64_t count);

// A fixed-state mixer's shapes on one GPU of a TP group of `tp`.
//   Gated DeltaNet (vLLM's Qwen3NextGatedDeltaNet): in_proj_qkvz and
//   in_proj_ba (h -> 2 key_dim + 2 value_dim + 2 value heads), a causal
//   convolution over q, k, v (conv_dim = 2 key_dim + value_dim), the delta
//   rule's state (value heads x key_head_dim x value_head_dim), a gated
//   RMSNorm and out_proj (value_dim -> h); heads split over TP.
//   Mamba-2 (vLLM's MambaMixer2): in_proj (h -> 2 inner + 2 groups x state +
//   heads), a causal convolution over x, B, C (conv_dim = inner + 2 groups x
//   state), the SSM state (heads x head_dim x ssm_state_size), a gated
//   RMSNorm and out_proj (inner -> h); heads split over TP, the groups too
//   when TP divides them (else each GPU holds one).
struct MixerShape {
  int64_t in_n = 0;           // input projection outputs (its k is hidden_size)
  int64_t out_k = 0;          // output projection inputs (its n is hidden_size)
  int64_t conv_dim = 0;       // channels of the causal convolution
  int64_t conv_kernel = 0;
  int64_t heads = 0;          // value heads (GDN) or SSM heads (Mamba-2)
  int64_t state_rows = 0;     // per head: key_head_dim (GDN) or head_dim (Mamba-2)
  int64_t state_cols = 0;     // per head: value_head_dim (GDN) or ssm_state_size (Mamba-2)
  int64_t small_params = 0;   // dt_bias, A, D, norm weight, conv bias: unquantised
  int64_t chunk = 0;          // the chunked scan's chunk in prefill
  int64_t state_elems() const { return heads * state_rows * state_cols; }
  int64_t conv_state_elems() const { return conv_dim * (conv_kernel - 1); }
  int64_t linear_params(int64_t h) const { return in_n * h + out_k * h + conv_dim * conv_kernel; }
};
// kind: LayerAttention::linear or ::mamba.
MixerShape mixer_shape(const ModelDesc& m, LayerAttention kind, int tp);

// The fixed state of one request in the whole model (tp 1), and on one GPU
// of stage `pp_stage`: each linear or mamba layer's state and convolution
// window, in `dtype` (vLLM's mamba_cache_dtype "auto": the model's dtype).
int64_t state_bytes_per_request(const ModelDesc& m, Dtype dtype);
int64_t state_bytes_per_request_per_gpu(const ModelDesc& m, Dtype dtype, const ParallelLayout& layout, int pp_stage);

// Throws UsageError when tp does not divide a mixer's heads (or, for GDN,
// its key heads); nothing for a model without such layers.
void check_mixer_layout(const ModelDesc& m, int tp);

}  // namespace twin
