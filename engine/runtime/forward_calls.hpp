#pragma once
// The kernels of each call of the forward program (models/forward_program):
// the model runner runs a whole pass through run_call, and the profiler's
// op bench times one call through the same function, so a timed op is
// exactly what a step runs.
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/backend/backend.hpp"
#include "engine/runtime/model_config.hpp"
#include "engine/runtime/model_weights.hpp"
#include "models/forward_program.hpp"

namespace twin {

// Activation buffers for up to `tokens` rows and `samples` sampling rows,
// carved out of one allocation. All f32 but topk_ids (i32).
struct ForwardScratch {
  Buffer storage;
  std::int64_t tokens = 0, samples = 0;
  TensorView x;              // the residual stream [T, H]
  TensorView h;              // normed rows [T, H]
  TensorView delta;          // a sublayer's output [T, H]
  TensorView qkv;            // [T, q_dim + 2 kv_dim]
  TensorView attn;           // [T, q_dim]
  TensorView gate_up, act;   // dense MLP [T', 2I], [T', I]
  TensorView router_logits;  // [T, E]
  TensorView topk_ids, topk_weights;  // [T, top_k]
  TensorView xs, hs;         // sampling rows, gathered and normed [S, H]
  TensorView logits;         // [S, V]
};

// (Re)allocates `s` for `tokens` rows and `samples` sampling rows, freeing
// the old storage first so the peak stays one scratch. The MLP's rows are
// tokens x mlp_row_factor (the op bench runs a MoE's expert GEMMs on
// tokens x top_k rows; the runner's fused moe_experts needs none). Throws
// twin::Error naming the sizes when the device cannot hold it.
void carve_scratch(Backend& backend, const ModelConfig& config, std::int64_t tokens, std::int64_t samples,
                   std::int64_t mlp_row_factor, ForwardScratch& s);

// One pass's inputs beside the weights: rows are the first `tokens` (and
// `samples`) of the scratch; the metadata spans are per token, per sequence
// and per sampling row as the backend's ops take them.
struct ForwardArgs {
  Backend* backend = nullptr;
  const ModelConfig* config = nullptr;
  const ModelWeights* weights = nullptr;
  const ForwardScratch* scratch = nullptr;
  std::int64_t tokens = 0, samples = 0;
  std::span<const TokenId> ids;
  std::span<const std::int32_t> positions;
  std::span<const std::int64_t> slots;
  std::span<const SeqAttention> attention_seqs;
  // KV cache per layer; a layer beyond the span uses layer % size (the op
  // bench holds one layer's cache).
  std::span<const KvCacheView> kv;
  std::span<const std::int32_t> sample_rows;
  std::span<const SamplingParams> sampling;
  std::span<TokenId> sampled;  // written by ForwardCall::sample
  AttentionShape attention;
  RopeConfig rope;
  float eps = 0;
};

// Enqueues the kernels of `call` on layer `layer` (ignored outside the
// layer part). input_norm on layer 0 has no residual to add yet.
void run_call(ForwardCall call, const ForwardArgs& args, std::size_t layer);

}  // namespace twin
