#pragma once
// Sizes derived from a model descriptor: parameters, weight and KV bytes, and
// how a parallel layout splits them.
#include <cstdint>

#include "models/dtype.hpp"
#include "models/model_desc.hpp"
#include "models/quantization.hpp"

namespace twin {

// Every parameter: embeddings, LM head (unless tied), attention (with QKV
// bias where present), MLP or all experts plus router, norms.
int64_t param_count(const ModelDesc& m);
// Parameters one token touches: for MoE only num_experts_per_tok experts.
int64_t active_param_count(const ModelDesc& m);
// Weight bytes at a precision: the linear layers in their (quantised)
// format with scales, the rest in its dtype; rounded up to a whole byte.
int64_t weight_bytes(const ModelDesc& m, const WeightPrecision& weights);
// Whole model: 2 (K and V) * layers * kv_heads * head_dim * bytes; with
// multi-head latent attention layers * (kv_lora_rank + qk_rope_head_dim) * bytes.
int64_t kv_bytes_per_token(const ModelDesc& m, Dtype kv);

// KV bytes one request of `tokens` tokens holds in the whole model when
// each layer keeps only what it can still read, as vLLM's hybrid KV cache
// manager does: full layers every token; sliding-window layers the last
// sliding_window - 1 tokens plus the one being computed (vLLM frees the
// blocks that fall out of the window: about a block more, not counted
// here); chunked layers the tokens of the current chunk. For a model
// without per-layer kinds, tokens * kv_bytes_per_token (a Mistral-style
// window is not bounded here, as the memory plan does not bound it).
int64_t kv_bytes_per_request(const ModelDesc& m, Dtype kv, int64_t tokens);

// TP splits every layer over tp GPUs; PP splits the layers into pp stages.
// EP (expert parallelism, MoE only) gives each stage `ep` ranks of tp GPUs:
// attention and the dense parts run data parallel, each rank on its share
// of the batch; the MoE layers' experts are split over the ranks (each
// expert still sharded over the rank's tp GPUs), tokens dispatched to their
// experts' ranks and combined back by all-to-alls. A stage has tp x ep GPUs.
struct ParallelLayout {
  int tp = 1;
  int pp = 1;
  int ep = 1;
  // Expert load under EP: the share of the step's routed token copies the
  // busiest rank's experts receive; the step waits for that rank. 0 (or
  // 1 / ep): uniform routing; up to 1: every copy on one rank.
  double expert_busiest_share = 0;
  double busiest_share() const { return expert_busiest_share > 0 ? expert_busiest_share : 1.0 / ep; }
  int gpus_per_stage() const { return tp * ep; }
};

// Throws UsageError unless: tp >= 1 divides num_attention_heads and
// intermediate_size; tp divides num_key_value_heads, or is a multiple of it
// (each KV head is then replicated on tp / kv_heads GPUs, as vLLM does); and
// 1 <= pp <= num_hidden_layers (stages may differ by one layer); ep >= 1,
// and ep > 1 only for a MoE model whose experts it divides, with
// expert_busiest_share 0 or in [1 / ep, 1].
void check_layout(const ModelDesc& m, const ParallelLayout& layout);

// Layers held by stage `pp_stage` (0-based): layers / pp, the first
// layers % pp stages one more.
int64_t stage_layers(const ModelDesc& m, int pp, int pp_stage);
// The first layer (0-based) of stage `pp_stage`, and how many of its layers
// have a dense MLP (a MoE model's first first_k_dense_replace layers).
int64_t stage_first_layer(const ModelDesc& m, int pp, int pp_stage);
int64_t stage_dense_layers(const ModelDesc& m, int pp, int pp_stage);
// Heads on one GPU of a TP group.
int64_t q_heads_per_gpu(const ModelDesc& m, int tp);
int64_t kv_heads_per_gpu(const ModelDesc& m, int tp);  // >= 1: replicated when tp > kv heads

// KV bytes per token on one GPU of the given stage (counts replicated heads;
// an MLA model's latent is whole on every GPU of the TP group).
int64_t kv_bytes_per_token_per_gpu(const ModelDesc& m, Dtype kv, const ParallelLayout& layout,
                                   int pp_stage);
// Weight bytes on one GPU of the given stage: its layers' shards, plus the
// embedding on the first stage and the LM head (or, when tied, a copy of the
// embedding) and final norm on the last. The vocabulary is sharded over TP.
// Under EP the GPU holds 1 / ep of the experts (each sharded over TP) and
// a copy of everything else its TP rank holds.
int64_t weight_bytes_per_gpu(const ModelDesc& m, const WeightPrecision& weights, const ParallelLayout& layout,
                             int pp_stage);

}  // namespace twin
