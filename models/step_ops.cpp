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

namespace {

// Rows of hidden states an EP rank receives per dispatch (and sends back
// per combine): every token of the other ranks (group_tokens x (ep-1)/ep)
// that has at least one of its top-k experts here. A routed copy lands on
// this rank with probability `share` (1/ep under uniform routing, the
// busiest rank's share under skew), so a token reaches it with
// probability 1 - (1 - share)^k; a token goes once to each rank, not once
// per expert there.
double ep_exchange_rows(int64_t group_tokens, int ep, int64_t top_k, double share) {
  const double others = static_cast<double>(group_tokens) * (ep - 1) / ep;
  return others * (1.0 - std::pow(1.0 - share, static_cast<double>(top_k)));
}

// The shapes one GPU of the stage works on in the step: what every call
// of the forward program reads to price itself.
struct StepShapes {
  int64_t tokens = 0, sampling = 0;
  int split = 1;              // the EP share of the batch (1 for a lockstep DP rank's own sums)
  int64_t group_tokens = 0;   // the tokens routed over the EP group
  int64_t expert_rows = 0;    // the routed rows the busiest rank's experts receive
  bool first = false, last = false;
  int64_t layers = 0;         // the stage's layers
  LayerCounts counts;         // ... by mixer and MLP kind
  int64_t dense_layers = 0;   // a MoE model's leading dense-MLP layers in the stage
  int64_t q_heads = 0, q_dim = 0, kv_dim = 0, inter = 0, expert_inter = 0, mlp_width = 0, vocab_shard = 0;
  double wb = 0, act = 0;     // dense weight and activation bytes per value
};

StepShapes step_shapes(const ModelDesc& m, const StepSums& sums, const ParallelLayout& layout,
                       const WeightPrecision& weights, int pp_stage) {
  StepShapes s;
  s.tokens = sums.tokens();
  s.sampling = sums.sampling;
  // Expert parallelism: the busiest rank's work. Attention and the dense
  // parts see 1/ep of the batch (its sequences are spread over the ranks);
  // the experts see the routed rows the busiest rank's experts receive.
  // Lockstep DP ranks (group_tokens >= 0): the sums are already this rank's
  // own batch, and the experts see the whole instance's tokens.
  const int ep = layout.ep;
  const bool own = sums.group_tokens >= 0;
  s.split = own ? 1 : ep;
  s.group_tokens = own ? sums.group_tokens : s.tokens;
  const int64_t routed = s.group_tokens * m.num_experts_per_tok;
  s.expert_rows = routed;
  if (ep > 1) {
    s.tokens = ep_share(s.tokens, s.split);
    s.sampling = ep_share(s.sampling, s.split);
    const double busiest = layout.expert_busiest_share * static_cast<double>(routed);
    s.expert_rows = layout.expert_busiest_share > 0
                        ? std::min<int64_t>(routed, static_cast<int64_t>(std::ceil(busiest - 1e-9)))
                        : ep_share(routed, ep);
  }
  const int tp = layout.tp;
  s.first = pp_stage == 0;
  s.last = pp_stage == layout.pp - 1;
  s.layers = stage_layers(m, layout.pp, pp_stage);
  s.q_heads = q_heads_per_gpu(m, tp);
  s.q_dim = s.q_heads * m.head_dim;
  s.kv_dim = kv_heads_per_gpu(m, tp) * m.head_dim;
  s.inter = m.intermediate_size / tp;
  s.expert_inter = m.expert_intermediate_size() / tp;
  // The stage's layers by mixer and MLP kind: a DeepSeek-style MoE model's
  // first layers have dense MLPs; a hybrid model's layers differ (its
  // attention calls run on its attention layers only).
  s.counts = stage_counts(m, layout.pp, pp_stage);
  s.dense_layers = m.is_moe() ? s.counts.dense : 0;
  s.mlp_width = m.mlp_gated ? 2 * s.inter : s.inter;  // Nemotron-H's relu2 MLP: no gate
  s.vocab_shard = (m.vocab_size + tp - 1) / tp;
  s.wb = weights.dense_bytes();
  s.act = weights.activation();
  return s;
}

// Prices the calls of the forward program one at a time, appending each
// call's ops, `instances` times over (its layers in the stage, or 1).
class CallPricer {
 public:
  CallPricer(const ModelDesc& m, const StepSums& sums, const ParallelLayout& layout, const WeightPrecision& weights,
             Dtype kv, int pp_stage, const StepShapes& s, std::vector<Op>& out)
      : m_(m), sums_(sums), layout_(layout), weights_(weights), kv_(kv), pp_stage_(pp_stage), s_(s), out_(out) {}

  // One short case per ForwardCall, read as a table; the longer ones have
  // their own functions below.
  void price(ForwardCall call, int64_t instances) {
    const int64_t tokens = s_.tokens, h = m_.hidden_size;
    const double act = s_.act, wb = s_.wb, dh = static_cast<double>(h);
    switch (call) {
      case ForwardCall::embed:
        // Gather one row of the (vocab-sharded) table per token, write it out.
        out_.push_back(elementwise(OpKind::embed, tokens, h, 0.0, wb + act, 0.0, instances));
        break;
      case ForwardCall::input_norm:
        // Fused residual add + norm: read x and residual, write both.
        norm_op_ = out_.size();
        out_.push_back(elementwise(OpKind::rmsnorm, tokens, h, kNormFlopsPerElem, 4.0 * act, dh * wb, instances));
        break;
      case ForwardCall::post_norm:
        // The same kernel on the same rows: more instances of input_norm's op.
        out_[norm_op_].repeat += static_cast<int32_t>(instances);
        break;
      case ForwardCall::qkv_proj:
        if (m_.is_mla()) {
          append_mla_projections(m_, tokens, layout_.tp, weights_, instances, out_);
          break;
        }
        out_.push_back(linear(OpKind::qkv_proj, tokens, (m_.attn_output_gate ? 2 : 1) * s_.q_dim + 2 * s_.kv_dim, h,
                              weights_, instances, m_.attention_bias));
        break;
      case ForwardCall::qk_norm: price_qk_norm(instances); break;
      case ForwardCall::rotary: price_rotary(instances); break;
      case ForwardCall::attention:
        append_attention(m_, sums_, s_.split, layout_, weights_, kv_, pp_stage_, out_);
        break;
      case ForwardCall::o_proj:
        // MLA's heads put out v_head_dim values each, not head_dim.
        out_.push_back(linear(OpKind::o_proj, tokens, h, m_.is_mla() ? s_.q_heads * m_.v_head_dim : s_.q_dim, weights_,
                              instances));
        break;
      case ForwardCall::gate_up_proj:
        out_.push_back(linear(OpKind::gate_up_proj, tokens, s_.mlp_width, h, weights_, instances));
        break;
      case ForwardCall::silu_mul:
        out_.push_back(elementwise(OpKind::silu_mul, tokens, s_.inter, kSiluFlopsPerElem, 3.0 * act, 0.0, instances));
        break;
      case ForwardCall::down_proj:
        out_.push_back(linear(OpKind::down_proj, tokens, h, s_.inter, weights_, instances));
        break;
      case ForwardCall::moe_router:
        out_.push_back(gemm(OpKind::moe_router, tokens, m_.num_local_experts, h, wb, act, instances));
        break;
      case ForwardCall::moe_experts: price_moe_experts(instances); break;
      case ForwardCall::final_norm: {
        // Priced as a norm over every token (vLLM normalises all rows, then
        // gathers the sampling ones); num_seqs tells the engine's profiler how
        // many rows its final_norm call gathers and normalises.
        Op final_norm = elementwise(OpKind::final_norm, tokens, h, kNormFlopsPerElem, 2.0 * act, dh * wb, instances);
        final_norm.num_seqs = s_.sampling;
        out_.push_back(final_norm);
        break;
      }
      case ForwardCall::lm_head:
        out_.push_back(gemm(OpKind::lm_head, s_.sampling, s_.vocab_shard, h, wb, act, instances));
        if (layout_.tp > 1)
          out_.push_back(collective(OpKind::tp_gather, s_.sampling, m_.vocab_size, act, layout_.tp, instances));
        break;
      case ForwardCall::sample: {
        Op sample = elementwise(OpKind::sample, s_.sampling, m_.vocab_size, kSampleFlopsPerElem, 4.0, 0.0, instances);
        sample.num_seqs = s_.sampling;
        out_.push_back(sample);
        break;
      }
    }
  }

 private:
  void price_qk_norm(int64_t instances) {
    // Read and written in place; the weights: head_dim each for q and k
    // per head, one per value per layer.
    const int64_t width = s_.q_dim + s_.kv_dim;
    const bool per_head = m_.qk_norm == QkNorm::per_head;
    const double weights_bytes = static_cast<double>(per_head ? 2 * m_.head_dim : width) * s_.wb;
    Op norm =
        elementwise(OpKind::qk_norm, s_.tokens, width, kQkNormFlopsPerElem, 2.0 * s_.act, weights_bytes, instances);
    norm.num_seqs = per_head ? s_.q_heads + s_.kv_dim / m_.head_dim : 2;
    out_.push_back(norm);
    // vLLM's MiniMaxText01RMSNormTP: the q and k sums of squares of each
    // token are all-reduced over the TP group (fp32).
    if (!per_head && layout_.tp > 1)
      out_.push_back(collective(OpKind::tp_allreduce, s_.tokens, 2, 4.0, layout_.tp, instances));
  }

  void price_rotary(int64_t instances) {
    const int64_t tokens = s_.tokens;
    if (m_.is_mla()) {
      // Only the rotary parts: each head's q_pe and the one shared k_pe.
      const int64_t rope = m_.qk_rope_head_dim;
      out_.push_back(elementwise(OpKind::rotary, tokens, (s_.q_heads + 1) * rope, kRotaryFlopsPerElem, 2.0 * s_.act,
                                 static_cast<double>(tokens * rope) * s_.act, instances));
      return;
    }
    out_.push_back(elementwise(OpKind::rotary, tokens, s_.q_dim + s_.kv_dim, kRotaryFlopsPerElem, 2.0 * s_.act,
                               static_cast<double>(tokens * m_.head_dim) * s_.act, instances));
  }

  void price_moe_experts(int64_t instances) {
    const int ep = layout_.ep, tp = layout_.tp;
    const int64_t h = m_.hidden_size, rows = s_.expert_rows;
    const int64_t touched = std::min(m_.num_local_experts / ep, rows);
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
    const double share = layout_.expert_busiest_share > 0 ? layout_.expert_busiest_share : 1.0 / ep;
    a2a.comm_bytes = ep_exchange_rows(s_.group_tokens, ep, m_.num_experts_per_tok, share) * static_cast<double>(h) *
                     s_.act / tp;
    a2a.group = ep;
    a2a.repeat = static_cast<int32_t>(instances);
    if (ep > 1) {
      a2a.kind = OpKind::ep_dispatch;
      out_.push_back(a2a);
    }
    // The weights of exactly the experts touched are read, in the
    // linear layers' format.
    Op up = linear(OpKind::moe_gate_up_proj, rows, 2 * s_.expert_inter, h, weights_, instances, false, touched);
    up.num_seqs = touched;
    out_.push_back(up);
    out_.push_back(
        elementwise(OpKind::silu_mul, rows, s_.expert_inter, kSiluFlopsPerElem, 3.0 * s_.act, 0.0, instances));
    Op down = linear(OpKind::moe_down_proj, rows, h, s_.expert_inter, weights_, instances, false, touched);
    down.num_seqs = touched;
    out_.push_back(down);
    if (ep > 1) {
      a2a.kind = OpKind::ep_combine;
      out_.push_back(a2a);
    }
    if (m_.n_shared_experts > 0) {
      // Shared experts (DeepSeek): one dense MLP of their summed width
      // over every token of the rank, beside the routed ones.
      const int64_t shared = m_.n_shared_experts * s_.expert_inter;
      out_.push_back(linear(OpKind::gate_up_proj, s_.tokens, 2 * shared, h, weights_, instances));
      out_.push_back(elementwise(OpKind::silu_mul, s_.tokens, shared, kSiluFlopsPerElem, 3.0 * s_.act, 0.0, instances));
      out_.push_back(linear(OpKind::down_proj, s_.tokens, h, shared, weights_, instances));
    }
  }

  const ModelDesc& m_;
  const StepSums& sums_;
  const ParallelLayout& layout_;
  const WeightPrecision& weights_;
  Dtype kv_;
  int pp_stage_;
  const StepShapes& s_;
  std::vector<Op>& out_;
  std::size_t norm_op_ = 0;  // where input_norm's op went: post_norm runs the same op
};

// How many times a layer call of the program runs on the stage (0: not
// here); the MLP and projection calls count only the layers that have them.
int64_t layer_call_instances(ForwardCall call, bool moe, const StepShapes& s) {
  if (call == ForwardCall::qkv_proj || call == ForwardCall::qk_norm || call == ForwardCall::rotary ||
      call == ForwardCall::o_proj)
    return s.counts.attention();
  // One norm in a mixer-only or MLP-only layer.
  if (call == ForwardCall::post_norm) return s.layers - s.counts.no_mixer - s.counts.no_mlp;
  if (!moe && (call == ForwardCall::gate_up_proj || call == ForwardCall::silu_mul || call == ForwardCall::down_proj))
    return s.counts.dense;
  if (call == ForwardCall::moe_router || call == ForwardCall::moe_experts) return s.counts.moe;
  return s.layers;
}

// The program's calls this stage runs, in order: the prologue on the first
// stage, its layers (returns the TP all-reduces they are followed by).
int64_t walk_layers(const ModelDesc& m, const StepShapes& s, int tp, const WeightPrecision& weights,
                    CallPricer& pricer, std::vector<Op>& out) {
  int64_t allreduces = 0;
  const bool moe = m.is_moe();
  const int64_t state_mixers = s.counts.linear + s.counts.mamba;
  for (ForwardCall call : forward_program(moe, m.has_qk_norm())) {
    const ForwardCallInfo& info = call_info(call);
    if (info.part == CallPart::epilogue) continue;
    if (info.part == CallPart::prologue ? !s.first : s.layers == 0) continue;
    // A hybrid model's linear-attention and Mamba layers project in and
    // out with their own shapes (their out-projection all-reduced under TP).
    if (state_mixers > 0 && (call == ForwardCall::qkv_proj || call == ForwardCall::o_proj)) {
      append_mixer_projections(m, call == ForwardCall::qkv_proj, s.counts, s.tokens, tp, weights, out);
      if (call == ForwardCall::o_proj) allreduces += state_mixers;
    }
    // The dense layers of a MoE model run the dense MLP's calls instead.
    if (call == ForwardCall::moe_router && s.dense_layers > 0) {
      for (ForwardCall dense : {ForwardCall::gate_up_proj, ForwardCall::silu_mul, ForwardCall::down_proj}) {
        pricer.price(dense, s.dense_layers);
        if (call_info(dense).tp_allreduce_after) allreduces += s.dense_layers;
      }
    }
    const int64_t instances = info.part == CallPart::layer ? layer_call_instances(call, moe, s) : 1;
    if (instances == 0) continue;
    pricer.price(call, instances);
    if (info.tp_allreduce_after) allreduces += instances;
  }
  return allreduces;
}

}  // namespace

void step_ops(const ModelDesc& m, const StepSums& sums, const ParallelLayout& layout,
              const WeightPrecision& weights, Dtype kv, int pp_stage, std::vector<Op>& out) {
  if (sums.tokens() == 0) return;
  const StepShapes s = step_shapes(m, sums, layout, weights, pp_stage);
  CallPricer pricer(m, sums, layout, weights, kv, pp_stage, s, out);
  // Under TP each call the program marks is followed by an all-reduce,
  // priced as one op of all of them.
  const int64_t allreduces = walk_layers(m, s, layout.tp, weights, pricer, out);
  if (layout.tp > 1 && allreduces > 0)
    out.push_back(collective(OpKind::tp_allreduce, s.tokens, m.hidden_size, s.act, layout.tp, allreduces));
  if (s.last) {
    // The epilogue on the last stage (the sampling calls only in a step
    // that samples).
    for (ForwardCall call : forward_program(m.is_moe(), m.has_qk_norm())) {
      const ForwardCallInfo& info = call_info(call);
      if (info.part != CallPart::epilogue || (info.rows == CallRows::sampling && s.sampling == 0)) continue;
      pricer.price(call, 1);
    }
  } else {
    // vLLM ships hidden states and the residual stream to the next stage.
    out.push_back(collective(OpKind::pp_send, s.tokens, 2 * m.hidden_size, s.act, 2, 1));
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
