#pragma once
// The ops of one step: the contract between the cost models (simulator) and
// the profiler (engine). Both name and shape ops the same way, so calibration
// tables measured on the engine are keyed by exactly what the simulator asks.
#include <cstdint>
#include <string_view>
#include <vector>

#include "models/dtype.hpp"
#include "models/model_desc.hpp"
#include "models/model_math.hpp"
#include "models/quantization.hpp"

namespace twin {

// What a cost model may see of one scheduled request in a step.
struct SeqShape {
  int64_t new_tokens = 0;      // tokens processed this step (a prompt chunk, or 1 to decode)
  int64_t context_tokens = 0;  // tokens already in the KV cache before this step
  bool samples = false;        // produces a token this step (needs logits)
  // Speculative verification: of new_tokens, the trailing proposals; each
  // needs logits too (the LM head and sampling run on 1 + lookahead rows).
  int64_t lookahead = 0;
};

struct BatchShape {
  std::vector<SeqShape> seqs;
};

// Execution order within a step. Per-layer kinds appear once with repeat =
// instances in the stage. Fields of Op used by each kind:
//   GEMMs (qkv_proj, o_proj, gate_up_proj, down_proj, moe_router, lm_head):
//     m x k activations times k x n weights; m = tokens (lm_head: sampling seqs).
//   moe_gate_up_proj, moe_down_proj: m = tokens * top_k rows spread evenly
//     (balanced routing) over num_seqs = experts touched = min(experts, m);
//     the weights of exactly those experts are read. A DeepSeek-style model
//     adds, per MoE layer, a gate_up_proj / silu_mul / down_proj of the
//     shared experts' summed width over every token, and runs the dense
//     MLP's three ops (instances = its first_k_dense_replace layers in the
//     stage) before the router.
//   embed, rmsnorm, final_norm, rotary, silu_mul: tokens rows of width n
//     (final_norm: num_seqs = the sampling seqs, whose rows it gathers).
//   qk_norm (models with ModelDesc::qk_norm; after qkv_proj): tokens rows
//     of the GPU's Q and K, n = (q heads + kv heads) x head_dim, normalised
//     in place (per head: num_seqs = the heads, one RMS each; per layer: the
//     Q and K parts of the row, plus under TP an all-reduce of the two sums
//     of squares per token, a tp_allreduce op of its own, fp32).
//   attn_prefill: the seqs with new > 1 or no context; attn_decode: new == 1
//     with context. num_seqs, tokens = sum of new, context = sum of context
//     (of the context inside the sliding window, for a windowed model)
//     before the step; n = query heads on this GPU, k = head_dim, m = the
//     most new tokens of one seq (a varlen call's query tiles). A model
//     with per-layer attention kinds has one op per kind present (full
//     layers, then the local ones: their context the part of the window or
//     chunk the queries read). Multi-head latent attention (ModelDesc::
//     is_mla) folds in the work its backend does inside the layer: prefill
//     up-projects the context's and new latents (kv_b_proj) and runs
//     multi-head attention, k = qk_nope + qk_rope; decode absorbs the
//     queries into the latent (W_UK), attends over the cached latents as
//     one shared head, and projects back (W_UV), k = kv_lora + qk_rope.
//     Its qkv_proj is two ops (the replicated down-projection, the query
//     up-projection) and its qk_norm op the two latents' RMSNorms.
//   state_scan (hybrid models' linear-attention and Mamba-2 layers,
//     models/state_scan.hpp): the scan over a fixed state per request, one
//     op for the prefill seqs and one for the decodes per mixer kind, after
//     the attention ops; num_seqs, tokens as attention's, context 0 (no
//     per-token cache), n = heads on this GPU, k = state values per head,
//     m = the prefill scan's chunk (1 for decode). Their in- and
//     out-projections are qkv_proj and o_proj ops of their own shapes. The
//     engine runs no such layers (it refuses these models).
//   tp_allreduce: comm_bytes = the buffer all-reduced (tokens * hidden *
//     activation bytes), group = tp. tp_gather: logits gathered for sampling.
//   pp_send: comm_bytes = hidden states and residual to the next stage.
//   sample: num_seqs sampling seqs over n = vocab.
//   ep_dispatch, ep_combine (ep > 1): the all-to-alls that send each token's
//     hidden state to the ranks of its experts and the expert outputs back;
//     m = the busiest rank's routed rows, comm_bytes = what one of its GPUs
//     receives (its rows from the other ranks: rows x (ep-1)/ep x hidden x
//     activation bytes, over the rank's tp GPUs), group = ep.
// Under EP (layout.ep > 1) the ops are those of the busiest rank: 1/ep of
// the batch's tokens, sequences and attention work (rounded up) for
// attention and the dense parts, and for the experts the routed rows
// (tokens x top_k) times layout.busiest_share() over num_local_experts / ep
// experts.
enum class OpKind : int32_t {
  embed,
  rmsnorm,
  qkv_proj,
  rotary,
  attn_prefill,
  attn_decode,
  o_proj,
  tp_allreduce,
  gate_up_proj,
  silu_mul,
  down_proj,
  moe_router,
  moe_gate_up_proj,
  moe_down_proj,
  final_norm,
  lm_head,
  tp_gather,
  sample,
  pp_send,
  ep_dispatch,
  ep_combine,
  qk_norm,
  state_scan,
};
inline constexpr int kNumOpKinds = static_cast<int>(OpKind::state_scan) + 1;

// Static snake_case name ("qkv_proj"); "unknown" for out-of-range values.
std::string_view op_name(OpKind kind);
// Inverse of op_name; throws UsageError listing the names.
OpKind parse_op_kind(std::string_view name);

struct Op {
  OpKind kind = OpKind::embed;
  int64_t m = 0, n = 0, k = 0;                 // GEMM shape (see OpKind)
  int64_t num_seqs = 0, tokens = 0, context = 0;  // attention, elementwise, MoE groups
  double flops = 0;       // one instance
  double bytes = 0;       // one instance: memory read + written (weights, activations, KV)
  int32_t repeat = 1;     // identical instances per step on one GPU (e.g. layers in the stage)
  double comm_bytes = 0;  // one instance: bytes of the collective / transfer
  int32_t group = 1;      // GPUs in the collective
  // One instance's time beyond both roofs: work neither FLOPs nor bytes
  // describe (a mixed attention call's grid blocks, sim/mixed_attention).
  double fixed_ns = 0;
};

// Appends the ops ONE GPU of stage `pp_stage` executes for the step, by
// pricing the engine's forward program (models/forward_program) call by
// call, so the two cannot list different passes: its
// layers' shards under TP, the embedding on the first stage, the final norm,
// LM head (sampling seqs only) and sampling on the last, two all-reduces per
// layer (and one after the vocab-parallel embedding) when tp > 1, and a send
// of the activations when pp > 1 and this is not the last stage.
// Seqs with new_tokens <= 0 are ignored; an empty batch appends nothing.
// The caller validates the layout once with check_layout and clears and
// reuses `out`: this allocates nothing once `out` has capacity (about 20 ops).
// Attention reads and writes KV in dtype `kv`; activations are
// activation_bytes(weights.dtype) wide. The linear layers' weights are read
// in their quantised format with its scales (weights.quant), and under W8A8
// their input activations in 8 bits; the rest stays in weights.dtype.
void step_ops(const ModelDesc& m, const BatchShape& batch, const ParallelLayout& layout,
              const WeightPrecision& weights, Dtype kv, int pp_stage, std::vector<Op>& out);

// Medusa-1's heads (SpeculativeMethod::medusa) over `rows` hidden states
// (one per seq proposing), on one GPU of a tp group: `heads` instances of a
// residual block (an h x h linear with bias, SiLU, added to its input;
// replicated) and an LM head of the head's own (vocab-parallel, then
// gathered, as vLLM's Medusa shards it), priced as an o_proj, a silu_mul,
// an lm_head and a tp_gather op of those shapes (the kernels a dense
// layer's o_proj and the LM head run). Appends to `out`; nothing for no
// rows or heads.
void medusa_heads_ops(const ModelDesc& m, std::int64_t rows, std::int32_t heads, const WeightPrecision& weights,
                      int tp, std::vector<Op>& out);
// The heads' weight bytes on one GPU of the tp group.
std::int64_t medusa_heads_bytes(const ModelDesc& m, std::int32_t heads, const WeightPrecision& weights, int tp);

// The batch as its ops see it, summed once per step (step_ops(batch) is
// step_ops(step_sums(batch))): the attention work of the prefill seqs and of
// the decodes, and the rows that need logits. Only the attention ops depend
// on more than tokens() and sampling, so a cost model may price the others
// once per (tokens, sampling, stage) and the attention ops (attention_ops)
// every step.
struct AttentionSums {
  int64_t seqs = 0, tokens = 0, context = 0;  // context: inside the sliding window
  int64_t score_pairs = 0;                    // (query, key) pairs with causal masking
  int64_t longest = 0;                        // the most new tokens of one seq
};
struct StepSums {
  AttentionSums prefill, decode;
  // A model with per-layer attention kinds (ModelDesc::layer_attention):
  // prefill and decode above are its full-attention layers' work, these its
  // local layers' (sliding-window or chunked), each query's keys bounded by
  // the window or its chunk. Empty for other models.
  AttentionSums prefill_local, decode_local;
  int64_t sampling = 0;  // rows of logits: sampling seqs and their lookahead
  // Rows an engine adds to run the step as a captured CUDA graph of a fixed
  // size (cudagraph_padded_tokens): they go through every token-wise op but
  // attend to nothing and sample nothing.
  int64_t padding = 0;
  // Lockstep data-parallel ranks under EP (sim/data_parallel.hpp): >= 0
  // means these sums are one rank's own batch, not the EP replica's (no
  // 1/ep share), and the experts are routed the whole instance's tokens
  // (this many, every rank's); -1: the sums are the whole replica's.
  int64_t group_tokens = -1;
  int64_t tokens() const { return prefill.tokens + decode.tokens + padding; }
};
// An engine's CUDA-graph capture sizes: a step it runs as a captured graph
// is padded to the smallest size that holds it (docs/engines.md).
struct GraphCapture {
  enum class Sizes : std::uint8_t {
    vllm,    // 1, 2, 4, then multiples of 8 to 256, then of 16 (vLLM's
             // cudagraph_capture_sizes); mixed steps too, by token count
    sglang,  // 1, 2, 4, 8, 12, multiples of 8 to 256, of 16 to 496, then of
             // 32 (SGLang's cuda_graph_bs); decode batches only
  };
  Sizes sizes = Sizes::vllm;
  int64_t max_tokens = 0;  // the largest capture size; 0: eager, no padding
};
// The token count an engine runs a step of `tokens` at: the smallest capture
// size that holds it, the largest being `capture.max_tokens` itself (a list
// cut there); `tokens` itself above that (eager), when max_tokens <= 0, or
// for a step with prefill work under SGLang's sizes (`decode_only` false).
int64_t cudagraph_padded_tokens(int64_t tokens, const GraphCapture& capture, bool decode_only = true);
StepSums step_sums(const ModelDesc& m, const BatchShape& batch);
void step_ops(const ModelDesc& m, const StepSums& sums, const ParallelLayout& layout,
              const WeightPrecision& weights, Dtype kv, int pp_stage, std::vector<Op>& out);
// Appends only the attention ops (attn_prefill, attn_decode) step_ops
// appends for these sums, equal to them field by field.
void attention_ops(const ModelDesc& m, const StepSums& sums, const ParallelLayout& layout,
                   const WeightPrecision& weights, Dtype kv, int pp_stage, std::vector<Op>& out);

// The GEMMs of the linear layers a quantization method quantises (attention
// and MLP projections, MoE experts; not the embedding, LM head or router).
constexpr bool is_quantized_linear(OpKind kind) {
  return kind == OpKind::qkv_proj || kind == OpKind::o_proj || kind == OpKind::gate_up_proj ||
         kind == OpKind::down_proj || kind == OpKind::moe_gate_up_proj || kind == OpKind::moe_down_proj;
}

// The routed experts' GEMMs (what an experts-only format such as mxfp4
// quantises; shared experts run as gate_up_proj / down_proj).
constexpr bool is_expert_linear(OpKind kind) {
  return kind == OpKind::moe_gate_up_proj || kind == OpKind::moe_down_proj;
}

struct StepTotals {
  double flops = 0;       // sum of flops * repeat
  double bytes = 0;       // sum of bytes * repeat
  double comm_bytes = 0;  // sum of comm_bytes * repeat
};
StepTotals step_totals(const std::vector<Op>& ops);

}  // namespace twin
