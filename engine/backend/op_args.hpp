#pragma once
// Plain argument structs of the backend ops. Small per-step metadata (token
// ids, positions, slots, block tables, sampling parameters) is passed as host
// spans; a device backend stages it to device memory itself.
#include <cstdint>
#include <span>

#include "base/types.hpp"
#include "engine/backend/tensor.hpp"

namespace twin {

// The routed experts of one MoE layer: gate_up[e] [2I, H] ([w1 | w3] stacked
// by rows) and down[e] [H, I], f32 or bf16, or i8 (weight-only int8) with
// gate_up_scales[e] [1, 2I] and down_scales[e] [1, H] f32 per-channel scales;
// the scale spans are empty for float experts.
struct ExpertWeights {
  std::span<const TensorView> gate_up, down;
  std::span<const TensorView> gate_up_scales, down_scales;
};

struct GemmOptions {
  const TensorView* bias = nullptr;  // [1, n] fp32/bf16, added to every row of C
  bool accumulate = false;           // C += A·W^T (bias, if any, added too)
  // W in i8 (weight-only int8): [1, n] f32, one scale per output channel;
  // W's row j stands for W[j] * w_scales[j]. Null for float weights.
  const TensorView* w_scales = nullptr;
};

// How a long-context checkpoint stretches the rotary frequencies (Hugging
// Face's rope_scaling): none; linear (every frequency / factor, i.e.
// positions / factor); llama3 (Llama 3.1+: wavelengths longer than
// original_max_position / low_freq_factor are divided by factor, those
// shorter than original_max_position / high_freq_factor kept, a linear blend
// in between). rope_inv_freq (rope.hpp) computes them for every backend.
enum class RopeScaling : std::int32_t { none, linear, llama3 };

// Rotary embedding in the GPT-NeoX / Llama (HF rotate_half) layout: within
// each head, element i pairs with element i + rotary_dim/2.
struct RopeConfig {
  std::int32_t head_dim = 0;
  std::int32_t rotary_dim = 0;  // 0 = head_dim; a smaller value rotates the head's first rotary_dim dims
  float theta = 10000.0f;
  RopeScaling scaling = RopeScaling::none;
  double factor = 1.0;                  // linear, llama3
  double low_freq_factor = 1.0;         // llama3
  double high_freq_factor = 4.0;        // llama3
  double original_max_position = 8192;  // llama3
};

struct AttentionShape {
  std::int32_t num_heads = 0;     // query heads
  std::int32_t num_kv_heads = 0;  // num_heads % num_kv_heads == 0 (GQA/MQA)
  std::int32_t head_dim = 0;
  float scale = 0.0f;              // 0 = 1/sqrt(head_dim)
  std::int32_t sliding_window = 0; // 0 = none; else a query at position p sees keys (p - window, p]
};

// One sequence of a step's attention batch. Its new tokens are rows
// [query_start, query_start + num_query) of q; their K/V must already be in
// the cache (kv_write first). context_len counts all its tokens including the
// new ones, so new token i sits at position context_len - num_query + i and
// attends causally to positions [0, that]. Decode is num_query == 1; a
// prefill chunk after a prefix-cache hit or an earlier chunk has
// context_len > num_query.
struct SeqAttention {
  std::int32_t query_start = 0;
  std::int32_t num_query = 0;
  std::int32_t context_len = 0;
  std::span<const BlockId> block_table;  // at least ceil(context_len / block_size) entries
};

// Sampling for one logits row. The random draw depends only on
// (seed, request, token_index), never on the batch or thread layout, so a
// request samples the same tokens whoever shares its step.
struct SamplingParams {
  float temperature = 0.0f;  // <= 0: greedy argmax (lowest id on ties)
  std::int32_t top_k = 0;    // <= 0: no top-k cut
  float top_p = 1.0f;        // >= 1: no nucleus cut
  std::uint64_t seed = 0;
  RequestId request = 0;
  std::int64_t token_index = 0;  // index of the token being sampled in the request's output
};

}  // namespace twin
