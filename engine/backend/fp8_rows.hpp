#pragma once
// Rows scaled into FP8 E4M3 (W8A8 fp8 GEMMs, docs/quantization.md): a row's
// scale is its largest magnitude over 448, E4M3's largest finite value, so
// the row uses the format's whole range; an all-zero row takes 1. Elements
// are stored as x x (1 / scale), rounded to nearest even. Weights are scaled
// per output channel at load, activations per token at each GEMM (vLLM's
// dynamic per-token fp8); the CUDA kernels compute the same scale and
// quantisation, so both backends see the same bytes.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "engine/backend/dtype.hpp"

namespace twin {

inline constexpr float kFp8E4m3Max = 448.0f;

inline float fp8_row_scale(const float* x, std::int64_t n) {
  float top = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) top = std::max(top, std::fabs(x[i]));
  return top > 0.0f && std::isfinite(top) ? top / kFp8E4m3Max : 1.0f;
}

inline void quantize_row_fp8(const float* x, std::int64_t n, float scale, std::uint8_t* q) {
  const float inv = 1.0f / scale;
  for (std::int64_t i = 0; i < n; ++i) q[i] = f32_to_fp8e4m3(x[i] * inv);
}

}  // namespace twin
