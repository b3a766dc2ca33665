#include "engine/runtime/forward_calls.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "base/error.hpp"

namespace twin {

void carve_scratch(Backend& backend, const ModelConfig& c, std::int64_t T, std::int64_t S,
                   std::int64_t mlp_row_factor, ForwardScratch& s) {
  const std::int64_t H = c.hidden_size, I = c.intermediate_size;
  const std::int64_t E = std::max<std::int64_t>(c.num_experts, 1), K = std::max<std::int64_t>(c.experts_per_token, 1);
  const std::int64_t M = T * std::max<std::int64_t>(mlp_row_factor, 1);
  struct Want {
    TensorView* view;
    ElemType dtype;
    std::int64_t rows, cols;
  };
  const std::vector<Want> wants = {
      {&s.x, ElemType::f32, T, H},           {&s.h, ElemType::f32, T, H},
      {&s.delta, ElemType::f32, T, H},       {&s.qkv, ElemType::f32, T, c.q_dim() + 2 * c.kv_dim()},
      {&s.attn, ElemType::f32, T, c.q_dim()}, {&s.gate_up, ElemType::f32, M, 2 * I},
      {&s.act, ElemType::f32, M, I},         {&s.router_logits, ElemType::f32, T, E},
      {&s.topk_ids, ElemType::i32, T, K},    {&s.topk_weights, ElemType::f32, T, K},
      {&s.xs, ElemType::f32, S, H},          {&s.hs, ElemType::f32, S, H},
      {&s.logits, ElemType::f32, S, c.vocab_size}};
  std::vector<std::size_t> offsets;
  std::size_t total = 0;
  for (const Want& w : wants) {
    total = (total + 63) / 64 * 64;
    offsets.push_back(total);
    total += static_cast<std::size_t>(w.rows * w.cols) * elem_bytes(w.dtype);
  }
  s.storage = Buffer();
  try {
    s.storage = backend.allocate(total);
  } catch (const Error& e) {
    throw Error("activation scratch for " + std::to_string(T) + " tokens and " + std::to_string(S) +
                " sampled rows: " + e.what());
  }
  for (std::size_t i = 0; i < wants.size(); ++i) {
    *wants[i].view = s.storage.view(wants[i].dtype, wants[i].rows, wants[i].cols, offsets[i]);
  }
  s.tokens = T;
  s.samples = S;
}

namespace {
// A projection's GEMM options: its int8 scales, where it is quantised.
GemmOptions scaled(const TensorView& scales) {
  GemmOptions o;
  if (scales.data) o.w_scales = &scales;
  return o;
}
}  // namespace

namespace {

// The attention half of a layer: the QKV projection, q/k norms, rotary,
// the KV write and attention, the output projection. False: not one of these.
bool run_attention_call(ForwardCall call, const ForwardArgs& a, const LayerWeights& L, std::size_t layer) {
  Backend& b = *a.backend;
  const ForwardScratch& s = *a.scratch;
  const std::int64_t T = a.tokens;
  const std::int64_t qd = a.config->q_dim(), kvd = a.config->kv_dim();
  auto rows = [T](const TensorView& v) { return v.slice_rows(0, T); };
  switch (call) {
    case ForwardCall::qkv_proj: {
      GemmOptions o;
      if (L.qkv_bias.data) o.bias = &L.qkv_bias;
      if (L.qkv_scales.data) o.w_scales = &L.qkv_scales;
      b.gemm(rows(s.h), L.qkv, rows(s.qkv), o);
      return true;
    }
    case ForwardCall::qk_norm: {
      // Each head's slice of every token row, normalised in place: one
      // strided [T, head_dim] view per head (the backend's rmsnorm takes a
      // row stride), the q heads with q_norm, the k heads with k_norm.
      const TensorView qkv = rows(s.qkv);
      const std::int64_t hd = a.config->head_dim;
      for (std::int64_t c = 0; c < qd + kvd; c += hd) {
        const TensorView head = qkv.slice_cols(c, hd);
        b.rmsnorm(head, c < qd ? L.q_norm : L.k_norm, a.eps, head);
      }
      return true;
    }
    case ForwardCall::rotary: {
      const TensorView qkv = rows(s.qkv);
      b.rotary(qkv.slice_cols(0, qd), qkv.slice_cols(qd, kvd), a.positions.first(static_cast<std::size_t>(T)), a.rope);
      return true;
    }
    case ForwardCall::attention: {
      const TensorView qkv = rows(s.qkv);
      const KvCacheView& cache = a.kv[layer % a.kv.size()];
      b.kv_write(qkv.slice_cols(qd, kvd), qkv.slice_cols(qd + kvd, kvd), cache, a.slots);
      b.paged_attention(qkv.slice_cols(0, qd), cache, a.attention_seqs, a.attention, rows(s.attn));
      return true;
    }
    case ForwardCall::o_proj:
      b.gemm(rows(s.attn), L.o, rows(s.delta), scaled(L.o_scales));
      return true;
    default:
      return false;
  }
}

// The MLP half: the dense MLP's projections and activation, or the MoE
// router and experts. False: not one of these.
bool run_mlp_call(ForwardCall call, const ForwardArgs& a, const LayerWeights& L) {
  Backend& b = *a.backend;
  const ForwardScratch& s = *a.scratch;
  const std::int64_t T = a.tokens;
  auto rows = [T](const TensorView& v) { return v.slice_rows(0, T); };
  switch (call) {
    case ForwardCall::gate_up_proj:
      b.gemm(rows(s.h), L.gate_up, rows(s.gate_up), scaled(L.gate_up_scales));
      return true;
    case ForwardCall::silu_mul:
      b.silu_and_mul(rows(s.gate_up), rows(s.act));
      return true;
    case ForwardCall::down_proj:
      b.gemm(rows(s.act), L.down, rows(s.delta), scaled(L.down_scales));
      return true;
    case ForwardCall::moe_router:
      b.gemm(rows(s.h), L.router, rows(s.router_logits));
      b.moe_topk(rows(s.router_logits), static_cast<std::int32_t>(a.config->experts_per_token), true,
                 rows(s.topk_ids), rows(s.topk_weights));
      return true;
    case ForwardCall::moe_experts:
      b.moe_experts(rows(s.h), rows(s.topk_ids), rows(s.topk_weights),
                    ExpertWeights{L.expert_gate_up, L.expert_down, L.expert_gate_up_scales, L.expert_down_scales},
                    rows(s.delta));
      return true;
    default:
      return false;
  }
}

}  // namespace

void run_call(ForwardCall call, const ForwardArgs& a, std::size_t layer) {
  Backend& b = *a.backend;
  const ForwardScratch& s = *a.scratch;
  const ModelWeights& w = *a.weights;
  const std::int64_t T = a.tokens, S = a.samples;
  const LayerWeights& L = w.layers[std::min(layer, w.layers.size() - 1)];
  auto rows = [T](const TensorView& v) { return v.slice_rows(0, T); };
  switch (call) {
    case ForwardCall::embed:
      b.embedding(a.ids.first(static_cast<std::size_t>(T)), w.embed, rows(s.x));
      return;
    case ForwardCall::input_norm:
      if (layer == 0) {
        b.rmsnorm(rows(s.x), L.input_norm, a.eps, rows(s.h));
      } else {
        b.add_rmsnorm(rows(s.x), rows(s.delta), L.input_norm, a.eps, rows(s.h));
      }
      return;
    case ForwardCall::post_norm:
      b.add_rmsnorm(rows(s.x), rows(s.delta), L.post_norm, a.eps, rows(s.h));
      return;
    case ForwardCall::final_norm:
      b.add(rows(s.x), rows(s.delta));
      if (S > 0) {
        b.gather_rows(rows(s.x), a.sample_rows.first(static_cast<std::size_t>(S)), s.xs.slice_rows(0, S));
        b.rmsnorm(s.xs.slice_rows(0, S), w.final_norm, a.eps, s.hs.slice_rows(0, S));
      }
      return;
    case ForwardCall::lm_head:
      b.gemm(s.hs.slice_rows(0, S), w.lm_head, s.logits.slice_rows(0, S));
      return;
    case ForwardCall::sample:
      b.sample(s.logits.slice_rows(0, S), a.sampling.first(static_cast<std::size_t>(S)),
               a.sampled.first(static_cast<std::size_t>(S)));
      return;
    default:
      break;
  }
  if (run_attention_call(call, a, L, layer) || run_mlp_call(call, a, L)) return;
  throw Error("forward: unknown call " + std::to_string(static_cast<int>(call)));
}

}  // namespace twin
