#include "models/step_ops.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "base/error.hpp"
#include "models/forward_program.hpp"
#include "models/hybrid_layers.hpp"
#include "models/state_scan.hpp"

namespace twin {

namespace {

constexpr std::string_view kOpNames[kNumOpKinds] = {
    "embed",        "rmsnorm",    "qkv_proj",         "rotary",        "attn_prefill",
    "attn_decode",  "o_proj",     "tp_allreduce",     "gate_up_proj",  "silu_mul",
    "down_proj",    "moe_router", "moe_gate_up_proj", "moe_down_proj", "final_norm",
    "lm_head",      "tp_gather",  "sample",           "pp_send",       "ep_dispatch",
    "ep_combine",   "qk_norm",    "state_scan",
};

// Rough per-element costs of the elementwise kernels; they are memory bound,
// so these only keep the flops honest, not the time.
constexpr double kNormFlopsPerElem = 5;    // residual add, square, sum, scale, weight
constexpr double kQkNormFlopsPerElem = 4;  // square, sum, scale, weight
constexpr double kRotaryFlopsPerElem = 3;  // two multiplies and an add per rotated pair half
constexpr double kSiluFlopsPerElem = 5;    // exp, add, divide, two multiplies
constexpr double kSampleFlopsPerElem = 5;  // max, exp, sum, scale, compare

// Attention work of the seqs of one kind, summed (AttentionSums). The sums
// are integers and kept as such (this loop runs per scheduled seq per
// simulated step); they are far below 2^53, so as doubles they are exact
// whatever the order of the seqs.
double kv_tokens(const AttentionSums& s) { return static_cast<double>(s.context + s.tokens); }  // KV rows read

// n new tokens after c cached ones. Query i sees c + i + 1 keys, or
// `window` once that is more; the chunk reads its keys from the first
// query's window start, so the context it reads is min(c, window - 1).
void add_seq(AttentionSums& s, int64_t n, int64_t c, int64_t window) {
  s.seqs += 1;
  s.tokens += n;
  s.longest = std::max(s.longest, n);
  if (window <= 0) {
    s.context += c;
    s.score_pairs += n * c + n * (n + 1) / 2;
    return;
  }
  s.context += std::min(c, window - 1);
  const int64_t full = std::clamp<int64_t>(window - c, 0, n);  // queries that see all their keys
  s.score_pairs += full * c + full * (full + 1) / 2 + (n - full) * window;
}

// n new tokens after c cached ones in a layer of chunked local attention
// (Llama 4): the query at position i sees the keys from its chunk's start,
// (i / chunk) * chunk, to itself; the step reads the cached part of the
// first query's chunk.
void add_seq_chunked(AttentionSums& s, int64_t n, int64_t c, int64_t chunk) {
  // Keys seen by the queries at positions 0 .. x-1.
  const auto seen = [chunk](int64_t x) {
    const int64_t q = x / chunk, r = x % chunk;
    return q * (chunk * (chunk + 1) / 2) + r * (r + 1) / 2;
  };
  s.seqs += 1;
  s.tokens += n;
  s.longest = std::max(s.longest, n);
  s.context += c % chunk;
  s.score_pairs += seen(c + n) - seen(c);
}

// The local layers' rule of a model with per-layer kinds: its one local kind.
void add_local_seq(const ModelDesc& m, AttentionSums& s, int64_t n, int64_t c) {
  if (m.layers_of(LayerAttention::chunked) > 0)
    add_seq_chunked(s, n, c, m.attention_chunk_size);
  else
    add_seq(s, n, c, m.sliding_window);
}

Op gemm(OpKind kind, int64_t m, int64_t n, int64_t k, double w_bytes, double act_bytes,
        int64_t repeat, bool bias = false) {
  Op op;
  op.kind = kind;
  op.m = m;
  op.n = n;
  op.k = k;
  op.tokens = m;
  const double dm = static_cast<double>(m), dn = static_cast<double>(n), dk = static_cast<double>(k);
  op.flops = 2.0 * dm * dn * dk + (bias ? dm * dn : 0.0);
  op.bytes = dn * dk * w_bytes + dm * dk * act_bytes + dm * dn * act_bytes + (bias ? dn * w_bytes : 0.0);
  op.repeat = static_cast<int32_t>(repeat);
  return op;
}

// A linear layer's GEMM: `matrices` n x k weights (MoE: the experts
// touched) with their scales in the precision's format (for its kind), its
// input activations at linear_input_bytes.
Op linear(OpKind kind, int64_t m, int64_t n, int64_t k, const WeightPrecision& precision, int64_t repeat,
          bool bias = false, int64_t matrices = 1) {
  // An experts-only format (mxfp4) leaves the other linear layers 16-bit.
  const WeightPrecision p = precision.for_linear(is_expert_linear(kind));
  Op op = gemm(kind, m, n, k, 0.0, p.activation(), repeat, bias);
  const double dm = static_cast<double>(m), dn = static_cast<double>(n), dk = static_cast<double>(k);
  op.bytes = static_cast<double>(matrices) * p.linear_bytes(n, k) + dm * dk * p.linear_input_bytes() +
             dm * dn * p.activation() + (bias ? dn * p.dense_bytes() : 0.0);
  return op;
}

Op elementwise(OpKind kind, int64_t tokens, int64_t width, double flops_per_elem,
               double bytes_per_elem, double extra_bytes, int64_t repeat) {
  Op op;
  op.kind = kind;
  op.tokens = tokens;
  op.m = tokens;
  op.n = width;
  const double elems = static_cast<double>(tokens) * static_cast<double>(width);
  op.flops = elems * flops_per_elem;
  op.bytes = elems * bytes_per_elem + extra_bytes;
  op.repeat = static_cast<int32_t>(repeat);
  return op;
}

Op attention(OpKind kind, const AttentionSums& s, int64_t q_heads, int64_t head_dim, double q_dim,
             double kv_dim, double act, double kvb, int64_t repeat) {
  const double new_tokens = static_cast<double>(s.tokens);
  // Every field named: the per-step hot path builds these (no zero-fill first).
  return Op{.kind = kind,
            .m = s.longest,
            .n = q_heads,
            .k = head_dim,
            .num_seqs = s.seqs,
            .tokens = s.tokens,
            .context = s.context,
            // QK^T and PV: 2 flops per multiply-add, 2 matmuls, per head and dim.
            .flops = 4.0 * static_cast<double>(s.score_pairs) * static_cast<double>(head_dim) *
                     static_cast<double>(q_heads),
            .bytes = kv_tokens(s) * 2.0 * kv_dim * kvb     // K and V read, context and new
                     + new_tokens * 2.0 * kv_dim * kvb      // new K and V written to the cache
                     + new_tokens * 2.0 * q_dim * act,      // Q read, O written
            .repeat = static_cast<int32_t>(repeat),
            .comm_bytes = 0,
            .group = 1,
            .fixed_ns = 0};
}

// Multi-head latent attention's attention call, as vLLM's MLA backends run
// it (vllm/v1/attention/backends/mla/common.py), for `heads` query heads on
// this GPU; P, R, V, L: qk_nope, qk_rope, v_head_dim, kv_lora_rank. Each
// op holds the work the backend does inside the attention layer, so that
// it depends on the prefill/decode split only (attention_ops):
//   prefill (compute-friendly, "_forward_prefill"): the cached latents of
//     the context and the new ones are up-projected by kv_b_proj to keys
//     (P per head, plus the shared rotary key R) and values (V per head),
//     then multi-head attention with QK width P + R and V width V;
//   decode (data-movement friendly, "_forward_decode"): each head's q_nope
//     is absorbed into the latent space (a batched GEMM by W_UK, P -> L),
//     multi-query attention over the cached latents (QK width L + R, V
//     width L, one cache row shared by all heads), and the output taken
//     back by W_UV (L -> V per head). vLLM keeps W_UK and W_UV as 16-bit
//     copies ("no quantized bmm's"), read here at the activation width.
Op mla_attention(OpKind kind, const ModelDesc& m, const AttentionSums& s, int64_t heads, const WeightPrecision& w,
                 double kvb, int64_t repeat) {
  const double H = static_cast<double>(heads), P = static_cast<double>(m.qk_nope_head_dim),
               R = static_cast<double>(m.qk_rope_head_dim), V = static_cast<double>(m.v_head_dim),
               L = static_cast<double>(m.kv_lora_rank), act = w.activation();
  const double T = static_cast<double>(s.tokens), rows = kv_tokens(s), pairs = static_cast<double>(s.score_pairs);
  const double ctx = static_cast<double>(s.context);
  Op op{.kind = kind, .m = 0, .n = heads, .k = 0, .num_seqs = s.seqs, .tokens = s.tokens, .context = s.context,
        .flops = 0, .bytes = 0, .repeat = static_cast<int32_t>(repeat), .comm_bytes = 0, .group = 1};
  const double cache_write = T * (L + R) * kvb;  // the new latents and rotary keys into the cache
  if (kind == OpKind::attn_prefill) {
    op.k = m.head_dim;
    const double up_flops = 2.0 * rows * L * H * (P + V);
    const double up_bytes = w.linear_bytes(heads * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank) +
                            ctx * (L + R) * kvb + T * (L + R) * act  // cached and new latents in
                            + rows * H * (P + V) * act;               // keys and values out
    const double attn_flops = pairs * H * (2.0 * (P + R) + 2.0 * V);
    const double attn_bytes = T * H * (P + R) * act + rows * H * (P + R + V) * act + T * H * V * act;
    op.flops = up_flops + attn_flops;
    op.bytes = up_bytes + attn_bytes + cache_write;
    return op;
  }
  op.k = m.mla_cache_dim();
  const double absorb_flops = 2.0 * T * H * P * L, out_flops = 2.0 * T * H * L * V;
  const double absorb_bytes = H * P * L * act + T * H * P * act + T * H * L * act;
  const double out_bytes = H * L * V * act + T * H * L * act + T * H * V * act;
  const double attn_flops = pairs * H * (2.0 * (L + R) + 2.0 * L);
  const double attn_bytes = rows * (L + R) * kvb + T * H * (L + R) * act + T * H * L * act;
  op.flops = absorb_flops + attn_flops + out_flops;
  op.bytes = absorb_bytes + attn_bytes + out_bytes + cache_write;
  return op;
}

Op collective(OpKind kind, int64_t tokens, int64_t width, double act, int group, int64_t repeat) {
  Op op;
  op.kind = kind;
  op.tokens = tokens;
  op.m = tokens;
  op.n = width;
  op.comm_bytes = static_cast<double>(tokens) * static_cast<double>(width) * act;
  op.group = group;
  op.repeat = static_cast<int32_t>(repeat);
  return op;
}

// Multi-head latent attention's projections before the attention call, on
// one GPU of a TP group (vLLM's DeepseekV2MLAAttention): the hidden state
// down to the query latent, the KV latent and the rotary key in one GEMM
// (fused_qkv_a_proj, replicated: every GPU computes all of it), the query
// up-projection of this GPU's heads (q_b_proj; q_proj straight from the
// hidden state without a query latent), and the RMSNorms of the two
// latents (q_a_layernorm, kv_a_layernorm), priced as a qk_norm op after the
// GEMMs (it runs between them; the order does not change the price). The
// keys' and values' up-projection runs inside the attention call.
void append_mla_projections(const ModelDesc& m, int64_t tokens, int tp, const WeightPrecision& w, int64_t instances,
                            std::vector<Op>& out) {
  const int64_t h = m.hidden_size;
  const int64_t heads = q_heads_per_gpu(m, tp);
  out.push_back(linear(OpKind::qkv_proj, tokens, m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim, h, w, instances));
  out.push_back(linear(OpKind::qkv_proj, tokens, heads * m.head_dim, m.q_lora_rank > 0 ? m.q_lora_rank : h, w,
                       instances));
  const int64_t latents = m.q_lora_rank + m.kv_lora_rank;
  Op norm = elementwise(OpKind::qk_norm, tokens, latents, kQkNormFlopsPerElem, 2.0 * w.activation(),
                        static_cast<double>(latents) * w.dense_bytes(), instances);
  norm.num_seqs = m.q_lora_rank > 0 ? 2 : 1;  // one RMS per latent
  out.push_back(norm);
}

// A hybrid model's linear-attention and Mamba layers' projections, priced
// as the attention layers' qkv_proj (in) and o_proj (out) GEMMs of their shapes.
void append_mixer_projections(const ModelDesc& m, bool in, const LayerCounts& counts, int64_t tokens, int tp,
                              const WeightPrecision& w, std::vector<Op>& out) {
  for (const auto& [kind, instances] : {std::pair{LayerAttention::linear, counts.linear},
                                        std::pair{LayerAttention::mamba, counts.mamba}}) {
    if (instances == 0) continue;
    const MixerShape s = mixer_shape(m, kind, tp);
    out.push_back(in ? linear(OpKind::qkv_proj, tokens, s.in_n, m.hidden_size, w, instances)
                     : linear(OpKind::o_proj, tokens, m.hidden_size, s.out_k, w, instances));
  }
}

// Under expert parallelism the busiest rank's share of the batch's
// sequences, tokens and attention work (rounded up).
int64_t ep_share(int64_t x, int ep) { return (x + ep - 1) / ep; }
AttentionSums ep_share(const AttentionSums& a, int ep) {
  if (ep <= 1) return a;
  return AttentionSums{ep_share(a.seqs, ep), ep_share(a.tokens, ep), ep_share(a.context, ep),
                       ep_share(a.score_pairs, ep), a.longest};
}

// The stage's layers of each kind (all full attention unless the model has
// per-layer kinds).
LayerCounts stage_counts(const ModelDesc& m, int pp, int pp_stage) {
  return count_layers(m, stage_first_layer(m, pp, pp_stage), stage_layers(m, pp, pp_stage));
}

// The attention call's ops for the stage's layers, from the step's sums
// (EP-shared by `split`): one for the prefill seqs, one for the decodes
// (each only when it has seqs), per attention kind the stage has (full
// layers first, then local ones).
void append_attention(const ModelDesc& m, const StepSums& sums, int split, const ParallelLayout& layout,
                      const WeightPrecision& weights, Dtype kv, int pp_stage, std::vector<Op>& out) {
  const int64_t q_heads = q_heads_per_gpu(m, layout.tp);
  const double q_dim = static_cast<double>(q_heads * m.head_dim);
  const double kv_dim = static_cast<double>(kv_heads_per_gpu(m, layout.tp) * m.head_dim);
  const double act = weights.activation();
  const double kvb = static_cast<double>(dtype_bytes(kv));
  const LayerCounts counts = stage_counts(m, layout.pp, pp_stage);
  const int64_t full = counts.full, local = counts.local;
  const auto push = [&](const AttentionSums& s, OpKind kind, int64_t instances) {
    if (s.seqs == 0 || instances == 0) return;
    const AttentionSums shared = ep_share(s, split);
    out.push_back(m.is_mla() ? mla_attention(kind, m, shared, q_heads, weights, kvb, instances)
                             : attention(kind, shared, q_heads, m.head_dim, q_dim, kv_dim, act, kvb, instances));
  };
  push(sums.prefill, OpKind::attn_prefill, full);
  push(sums.decode, OpKind::attn_decode, full);
  push(sums.prefill_local, OpKind::attn_prefill, local);
  push(sums.decode_local, OpKind::attn_decode, local);
  // The fixed-state mixers: their scans, by the seqs and new tokens alone.
  for (const auto& [kind, instances] : {std::pair{LayerAttention::linear, counts.linear},
                                        std::pair{LayerAttention::mamba, counts.mamba}}) {
    if (instances == 0) continue;
    const MixerShape shape = mixer_shape(m, kind, layout.tp);
    for (const bool prefill : {true, false}) {
      const AttentionSums s = ep_share(prefill ? sums.prefill : sums.decode, split);
      if (s.seqs > 0) out.push_back(state_scan_op(shape, s.seqs, s.tokens, prefill, act, act, instances));
    }
  }
}

}  // namespace

std::string_view op_name(OpKind kind) {
  const int i = static_cast<int>(kind);
  return i >= 0 && i < kNumOpKinds ? kOpNames[i] : "unknown";
}

OpKind parse_op_kind(std::string_view name) {
  for (int i = 0; i < kNumOpKinds; ++i)
    if (kOpNames[i] == name) return static_cast<OpKind>(i);
  std::string known;
  for (auto n : kOpNames) known += (known.empty() ? "" : ", ") + std::string(n);
  throw UsageError("unknown op '" + excerpt(name, 40) + "'; known ops: " + known);
}

StepSums step_sums(const ModelDesc& m, const BatchShape& batch) {
  StepSums sums;
  // Per-layer kinds: the sums above are the full layers' (no window), the
  // local ones the local layers'.
  const bool per_layer = !m.layer_attention.empty();
  const bool local = per_layer && m.layers_of(LayerAttention::sliding) + m.layers_of(LayerAttention::chunked) > 0;
  const int64_t window = per_layer ? 0 : m.sliding_window;
  for (const SeqShape& s : batch.seqs) {
    if (s.new_tokens <= 0) continue;
    const int64_t ctx = std::max<int64_t>(s.context_tokens, 0);
    const bool decode = s.new_tokens == 1 && ctx > 0;
    add_seq(decode ? sums.decode : sums.prefill, s.new_tokens, ctx, window);
    if (local) add_local_seq(m, decode ? sums.decode_local : sums.prefill_local, s.new_tokens, ctx);
    sums.sampling += s.samples ? 1 + std::max<int64_t>(s.lookahead, 0) : 0;
  }
  return sums;
}

namespace {

// vLLM's default cudagraph_capture_sizes (config/compilation.py).
int64_t vllm_capture_size(int64_t tokens) {
  if (tokens <= 4) return tokens <= 1 ? 1 : tokens <= 2 ? 2 : 4;
  if (tokens <= 256) return (tokens + 7) / 8 * 8;
  return 256 + (tokens - 256 + 15) / 16 * 16;
}

// SGLang's default cuda_graph_bs without speculation
// (server_args.py, _generate_cuda_graph_batch_sizes).
int64_t sglang_capture_size(int64_t tokens) {
  for (const int64_t small : {1, 2, 4, 8, 12}) {
    if (tokens <= small) return small;
  }
  if (tokens <= 256) return (tokens + 7) / 8 * 8;
  if (tokens <= 496) return 256 + (tokens - 256 + 15) / 16 * 16;
  return 512 + std::max<int64_t>(0, tokens - 512 + 31) / 32 * 32;
}

}  // namespace

int64_t cudagraph_padded_tokens(int64_t tokens, const GraphCapture& capture, bool decode_only) {
  if (capture.max_tokens <= 0 || tokens <= 0 || tokens > capture.max_tokens) return tokens;
  if (capture.sizes == GraphCapture::Sizes::sglang && !decode_only) return tokens;  // prefill runs eagerly
  const int64_t size = capture.sizes == GraphCapture::Sizes::sglang ? sglang_capture_size(tokens) : vllm_capture_size(tokens);
  // The largest capture size is max_tokens itself (a list cut there).
  return std::min(size, capture.max_tokens);
}

void step_ops(const ModelDesc& m, const BatchShape& batch, const ParallelLayout& layout,
              const WeightPrecision& weights, Dtype kv, int pp_stage, std::vector<Op>& out) {
  step_ops(m, step_sums(m, batch), layout, weights, kv, pp_stage, out);
}

void attention_ops(const ModelDesc& m, const StepSums& sums, const ParallelLayout& layout,
                   const WeightPrecision& weights, Dtype kv, int pp_stage, std::vector<Op>& out) {
  // The attention call is a layer call of every forward program: its
  // instances are the stage's layers.
  const int64_t layers = stage_layers(m, layout.pp, pp_stage);
  if (sums.tokens() == 0 || layers == 0) return;
  const int split = sums.group_tokens >= 0 ? 1 : layout.ep;  // lockstep DP ranks: their own batch
  append_attention(m, sums, split, layout, weights, kv, pp_stage, out);
}

// Rows of hidden states an EP rank receives per dispatch (and sends back
// per combine): every token of the other ranks (group_tokens x (ep-1)/ep)
// that has at least one of its top-k experts here. A routed copy lands on
// this rank with probability `share` (1/ep under uniform routing, the
// busiest rank's share under skew), so a token reaches it with
// probability 1 - (1 - share)^k; a token goes once to each rank, not once
// per expert there.
namespace {
double ep_exchange_rows(int64_t group_tokens, int ep, int64_t top_k, double share) {
  const double others = static_cast<double>(group_tokens) * (ep - 1) / ep;
  return others * (1.0 - std::pow(1.0 - share, static_cast<double>(top_k)));
}
}  // namespace

// Over 80 lines on purpose: the shapes below (per-GPU heads, widths, the
// EP share, the stage's layer counts) are read by every call's case in
// `price` and by the walk over the forward program after it; split, each
// piece would take the dozen of them as parameters. The walk is the part
// to move out first (issue 42).
void step_ops(const ModelDesc& m, const StepSums& sums, const ParallelLayout& layout,
              const WeightPrecision& weights, Dtype kv, int pp_stage, std::vector<Op>& out) {
  int64_t tokens = sums.tokens();
  if (tokens == 0) return;
  int64_t sampling = sums.sampling;
  // Expert parallelism: the busiest rank's work. Attention and the dense
  // parts see 1/ep of the batch (its sequences are spread over the ranks);
  // the experts see the routed rows the busiest rank's experts receive.
  // Lockstep DP ranks (group_tokens >= 0): the sums are already this rank's
  // own batch, and the experts see the whole instance's tokens.
  const int ep = layout.ep;
  const bool own = sums.group_tokens >= 0;
  const int split = own ? 1 : ep;
  const int64_t group_tokens = own ? sums.group_tokens : tokens;
  const int64_t routed = group_tokens * m.num_experts_per_tok;
  int64_t expert_rows = routed;
  if (ep > 1) {
    tokens = ep_share(tokens, split);
    sampling = ep_share(sampling, split);
    expert_rows = layout.expert_busiest_share > 0
                      ? std::min<int64_t>(routed, static_cast<int64_t>(std::ceil(layout.expert_busiest_share *
                                                                                 static_cast<double>(routed) - 1e-9)))
                      : ep_share(routed, ep);
  }

  const int tp = layout.tp;
  const bool first = pp_stage == 0, last = pp_stage == layout.pp - 1;
  const int64_t layers = stage_layers(m, layout.pp, pp_stage);
  const int64_t h = m.hidden_size;
  const int64_t q_heads = q_heads_per_gpu(m, tp);
  const int64_t q_dim = q_heads * m.head_dim;
  const int64_t kv_dim = kv_heads_per_gpu(m, tp) * m.head_dim;
  const int64_t inter = m.intermediate_size / tp;
  const int64_t expert_inter = m.expert_intermediate_size() / tp;
  // The stage's layers by mixer and MLP kind: a DeepSeek-style MoE model's
  // first layers have dense MLPs; a hybrid model's layers differ (its
  // attention calls run on its attention layers only).
  const LayerCounts counts = stage_counts(m, layout.pp, pp_stage);
  const int64_t dense_layers = m.is_moe() ? counts.dense : 0;
  const int64_t mlp_width = m.mlp_gated ? 2 * inter : inter;  // Nemotron-H's relu2 MLP: no gate
  const int64_t vocab_shard = (m.vocab_size + tp - 1) / tp;
  const double wb = weights.dense_bytes();
  const double act = weights.activation();
  const double dh = static_cast<double>(h);

  const bool moe = m.is_moe();
  std::size_t norm_op = 0;  // where input_norm's op went: post_norm runs the same op
  // The ops one call of the forward program runs, `instances` times (its
  // layers in the stage, or 1). Over 80 lines on purpose: one short case
  // per ForwardCall, read as a table; split, the dozen shapes and dtypes
  // above would travel as parameters to every piece.
  auto price = [&](ForwardCall call, int64_t instances) {
    switch (call) {
      case ForwardCall::embed:
        // Gather one row of the (vocab-sharded) table per token, write it out.
        out.push_back(elementwise(OpKind::embed, tokens, h, 0.0, wb + act, 0.0, instances));
        break;
      case ForwardCall::input_norm:
        // Fused residual add + norm: read x and residual, write both.
        norm_op = out.size();
        out.push_back(elementwise(OpKind::rmsnorm, tokens, h, kNormFlopsPerElem, 4.0 * act, dh * wb, instances));
        break;
      case ForwardCall::post_norm:
        // The same kernel on the same rows: more instances of input_norm's op.
        out[norm_op].repeat += static_cast<int32_t>(instances);
        break;
      case ForwardCall::qkv_proj:
        if (m.is_mla()) {
          append_mla_projections(m, tokens, tp, weights, instances, out);
          break;
        }
        out.push_back(linear(OpKind::qkv_proj, tokens, (m.attn_output_gate ? 2 : 1) * q_dim + 2 * kv_dim, h, weights,
                             instances, m.attention_bias));
        break;
      case ForwardCall::qk_norm: {
        // Read and written in place; the weights: head_dim each for q and k
        // per head, one per value per layer.
        const int64_t width = q_dim + kv_dim;
        const bool per_head = m.qk_norm == QkNorm::per_head;
        const double weights_bytes = static_cast<double>(per_head ? 2 * m.head_dim : width) * wb;
        Op norm = elementwise(OpKind::qk_norm, tokens, width, kQkNormFlopsPerElem, 2.0 * act, weights_bytes, instances);
        norm.num_seqs = per_head ? q_heads + kv_dim / m.head_dim : 2;
        out.push_back(norm);
        // vLLM's MiniMaxText01RMSNormTP: the q and k sums of squares of each
        // token are all-reduced over the TP group (fp32).
        if (!per_head && tp > 1) out.push_back(collective(OpKind::tp_allreduce, tokens, 2, 4.0, tp, instances));
        break;
      }
      case ForwardCall::rotary:
        if (m.is_mla()) {
          // Only the rotary parts: each head's q_pe and the one shared k_pe.
          const int64_t rope = m.qk_rope_head_dim;
          out.push_back(elementwise(OpKind::rotary, tokens, (q_heads + 1) * rope, kRotaryFlopsPerElem, 2.0 * act,
                                    static_cast<double>(tokens * rope) * act, instances));
          break;
        }
        out.push_back(elementwise(OpKind::rotary, tokens, q_dim + kv_dim, kRotaryFlopsPerElem, 2.0 * act,
                                  static_cast<double>(tokens * m.head_dim) * act, instances));
        break;
      case ForwardCall::attention:
        append_attention(m, sums, split, layout, weights, kv, pp_stage, out);
        break;
      case ForwardCall::o_proj:
        // MLA's heads put out v_head_dim values each, not head_dim.
        out.push_back(linear(OpKind::o_proj, tokens, h, m.is_mla() ? q_heads * m.v_head_dim : q_dim, weights, instances));
        break;
      case ForwardCall::gate_up_proj:
        out.push_back(linear(OpKind::gate_up_proj, tokens, mlp_width, h, weights, instances));
        break;
      case ForwardCall::silu_mul:
        out.push_back(elementwise(OpKind::silu_mul, tokens, inter, kSiluFlopsPerElem, 3.0 * act, 0.0, instances));
        break;
      case ForwardCall::down_proj:
        out.push_back(linear(OpKind::down_proj, tokens, h, inter, weights, instances));
        break;
      case ForwardCall::moe_router:
        out.push_back(gemm(OpKind::moe_router, tokens, m.num_local_experts, h, wb, act, instances));
        break;
      case ForwardCall::moe_experts: {
        const int64_t rows = expert_rows;
        const int64_t touched = std::min(m.num_local_experts / ep, rows);
        // The rank's tokens go out to the other ranks (dispatch) and come
        // back (combine) through all-to-alls over the EP group, each GPU of
        // the rank moving 1/tp of them. A token's hidden state goes once to
        // each rank holding one of its experts, not once per expert: vLLM's
        // default allgather_reducescatter backend sends it to every rank,
        // DeepEP and pplx once per destination rank (docs/simulate.md).
        Op a2a;
        a2a.m = rows;
        a2a.tokens = rows;
        a2a.n = h;
        const double share = layout.expert_busiest_share > 0 ? layout.expert_busiest_share : 1.0 / ep;
        a2a.comm_bytes = ep_exchange_rows(group_tokens, ep, m.num_experts_per_tok, share) * dh * act / tp;
        a2a.group = ep;
        a2a.repeat = static_cast<int32_t>(instances);
        if (ep > 1) {
          a2a.kind = OpKind::ep_dispatch;
          out.push_back(a2a);
        }
        // The weights of exactly the experts touched are read, in the
        // linear layers' format.
        Op up = linear(OpKind::moe_gate_up_proj, rows, 2 * expert_inter, h, weights, instances, false, touched);
        up.num_seqs = touched;
        out.push_back(up);
        out.push_back(elementwise(OpKind::silu_mul, rows, expert_inter, kSiluFlopsPerElem, 3.0 * act, 0.0, instances));
        Op down = linear(OpKind::moe_down_proj, rows, h, expert_inter, weights, instances, false, touched);
        down.num_seqs = touched;
        out.push_back(down);
        if (ep > 1) {
          a2a.kind = OpKind::ep_combine;
          out.push_back(a2a);
        }
        if (m.n_shared_experts > 0) {
          // Shared experts (DeepSeek): one dense MLP of their summed width
          // over every token of the rank, beside the routed ones.
          const int64_t shared = m.n_shared_experts * expert_inter;
          out.push_back(linear(OpKind::gate_up_proj, tokens, 2 * shared, h, weights, instances));
          out.push_back(elementwise(OpKind::silu_mul, tokens, shared, kSiluFlopsPerElem, 3.0 * act, 0.0, instances));
          out.push_back(linear(OpKind::down_proj, tokens, h, shared, weights, instances));
        }
        break;
      }
      case ForwardCall::final_norm: {
        // Priced as a norm over every token (vLLM normalises all rows, then
        // gathers the sampling ones); num_seqs tells the engine's profiler how
        // many rows its final_norm call gathers and normalises.
        Op final_norm = elementwise(OpKind::final_norm, tokens, h, kNormFlopsPerElem, 2.0 * act, dh * wb, instances);
        final_norm.num_seqs = sampling;
        out.push_back(final_norm);
        break;
      }
      case ForwardCall::lm_head:
        out.push_back(gemm(OpKind::lm_head, sampling, vocab_shard, h, wb, act, instances));
        if (tp > 1) out.push_back(collective(OpKind::tp_gather, sampling, m.vocab_size, act, tp, instances));
        break;
      case ForwardCall::sample: {
        Op sample = elementwise(OpKind::sample, sampling, m.vocab_size, kSampleFlopsPerElem, 4.0, 0.0, instances);
        sample.num_seqs = sampling;
        out.push_back(sample);
        break;
      }
    }
  };

  // The program's calls this stage runs, in order: the prologue on the
  // first stage, its layers, the epilogue on the last (the sampling calls
  // only in a step that samples). Under TP each call the program marks is
  // followed by an all-reduce, priced as one op of all of them.
  int64_t allreduces = 0;
  const bool qk_norm = m.has_qk_norm();
  const int64_t state_mixers = counts.linear + counts.mamba;
  for (ForwardCall call : forward_program(moe, qk_norm)) {
    const ForwardCallInfo& info = call_info(call);
    if (info.part == CallPart::epilogue) continue;
    if (info.part == CallPart::prologue ? !first : layers == 0) continue;
    int64_t instances = info.part == CallPart::layer ? layers : 1;
    if (call == ForwardCall::qkv_proj || call == ForwardCall::qk_norm || call == ForwardCall::rotary ||
        call == ForwardCall::o_proj) {
      instances = counts.attention();
      // A hybrid model's linear-attention and Mamba layers project in and
      // out with their own shapes (their out-projection all-reduced under TP).
      if (state_mixers > 0 && (call == ForwardCall::qkv_proj || call == ForwardCall::o_proj)) {
        append_mixer_projections(m, call == ForwardCall::qkv_proj, counts, tokens, tp, weights, out);
        if (call == ForwardCall::o_proj) allreduces += state_mixers;
      }
    } else if (call == ForwardCall::post_norm) {
      instances = layers - counts.no_mixer - counts.no_mlp;  // one norm in a mixer-only or MLP-only layer
    } else if (!moe && (call == ForwardCall::gate_up_proj || call == ForwardCall::silu_mul ||
                        call == ForwardCall::down_proj)) {
      instances = counts.dense;
    }
    if (instances == 0) continue;
    if (call == ForwardCall::moe_router || call == ForwardCall::moe_experts) {
      // The dense layers of a MoE model run the dense MLP's calls instead.
      if (call == ForwardCall::moe_router && dense_layers > 0) {
        for (ForwardCall dense : {ForwardCall::gate_up_proj, ForwardCall::silu_mul, ForwardCall::down_proj}) {
          price(dense, dense_layers);
          if (call_info(dense).tp_allreduce_after) allreduces += dense_layers;
        }
      }
      instances = counts.moe;
      if (instances == 0) continue;
    }
    price(call, instances);
    if (info.tp_allreduce_after) allreduces += instances;
  }
  if (tp > 1 && allreduces > 0) out.push_back(collective(OpKind::tp_allreduce, tokens, h, act, tp, allreduces));
  if (last) {
    for (ForwardCall call : forward_program(moe, qk_norm)) {
      const ForwardCallInfo& info = call_info(call);
      if (info.part != CallPart::epilogue || (info.rows == CallRows::sampling && sampling == 0)) continue;
      price(call, 1);
    }
  } else {
    // vLLM ships hidden states and the residual stream to the next stage.
    out.push_back(collective(OpKind::pp_send, tokens, 2 * h, act, 2, 1));
  }
}

void medusa_heads_ops(const ModelDesc& m, std::int64_t rows, std::int32_t heads, const WeightPrecision& weights,
                      int tp, std::vector<Op>& out) {
  if (rows <= 0 || heads <= 0) return;
  const int64_t h = m.hidden_size;
  const double wb = weights.dense_bytes();
  const double act = weights.activation();
  // Each head: x + SiLU(W x + b), then its own LM head; as a dense model's
  // o_proj (h x h, replicated on every GPU of the group), an elementwise
  // SiLU and add over h, and its LM head, vocab-parallel as the target's.
  out.push_back(gemm(OpKind::o_proj, rows, h, h, wb, act, heads, true));
  out.push_back(elementwise(OpKind::silu_mul, rows, h, kSiluFlopsPerElem, 3.0 * act, 0.0, heads));
  out.push_back(gemm(OpKind::lm_head, rows, (m.vocab_size + tp - 1) / tp, h, wb, act, heads));
  if (tp > 1) out.push_back(collective(OpKind::tp_gather, rows, m.vocab_size, act, tp, heads));
}

std::int64_t medusa_heads_bytes(const ModelDesc& m, std::int32_t heads, const WeightPrecision& weights, int tp) {
  const double h = static_cast<double>(m.hidden_size);
  const double v = static_cast<double>((m.vocab_size + tp - 1) / tp);
  return static_cast<std::int64_t>(static_cast<double>(heads) * (h * h + h + h * v) * weights.dense_bytes());
}

StepTotals step_totals(const std::vector<Op>& ops) {
  StepTotals t;
  for (const Op& op : ops) {
    t.flops += op.flops * op.repeat;
    t.bytes += op.bytes * op.repeat;
    t.comm_bytes += op.comm_bytes * op.repeat;
  }
  return t;
}

}  // namespace twin
