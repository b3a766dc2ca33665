// GEMMs. Up to kGemmDirectMaxRows rows of A (decode) run our own
// register-blocked kernel, which streams each weight once for all the rows
// (bf16 weights converted in registers, so they read half the bytes of f32).
// More rows go to OpenBLAS's SGEMM: f32 weights straight, bf16 weights one
// tile at a time converted into a small f32 scratch, so the conversion is
// amortised over the rows and no full f32 copy of the weights is kept (see
// docs/engine.md, Backend).
#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <string>

#include "base/error.hpp"
#include "engine/backend/cpu/cpu_backend_impl.hpp"
#include "engine/backend/op_checks.hpp"

namespace twin {

namespace {

// Rows of W per tile: small enough to spread an FFN's columns over the
// cores, large enough for SGEMM to run at speed.
constexpr std::int64_t kGemmTileCols = 128;

inline __attribute__((always_inline)) float weight_f32(float w) { return w; }
inline __attribute__((always_inline)) float weight_f32(std::uint16_t w) { return bf16_to_f32(w); }
inline __attribute__((always_inline)) float weight_f32(std::int8_t w) { return static_cast<float>(w); }

// Eight float lanes in GCC's vector extension: one AVX register in the AVX2
// clone, two SSE registers in the baseline one, the same arithmetic in both.
using Lanes = float __attribute__((vector_size(32)));
using LanesU16 = std::uint16_t __attribute__((vector_size(16)));
using LanesU32 = std::uint32_t __attribute__((vector_size(32)));
using LanesI8 = std::int8_t __attribute__((vector_size(8)));
using LanesI16 = std::int16_t __attribute__((vector_size(16)));
using LanesI32 = std::int32_t __attribute__((vector_size(32)));

// Loads through an out-parameter: a vector returned by value would change the
// baseline clone's ABI (-Wpsabi).
inline __attribute__((always_inline)) void load_lanes(const float* p, Lanes& v) { std::memcpy(&v, p, sizeof v); }

inline __attribute__((always_inline)) void load_lanes(const std::uint16_t* p, Lanes& v) {
  LanesU16 h;
  std::memcpy(&h, p, sizeof h);
  const LanesU32 bits = __builtin_convertvector(h, LanesU32) << 16;  // bf16 is the top half of an f32
  std::memcpy(&v, &bits, sizeof v);
}

// int8 weights (weight-only quantisation): the integers as floats; their
// per-channel scale multiplies the finished dot product (direct_block), so
// a decode streams one byte per weight.
inline __attribute__((always_inline)) void load_lanes(const std::int8_t* p, Lanes& v) {
  // i8 -> i16 -> i32 -> f32: GCC compiles the one-step i8 -> i32 vector
  // conversion into scalar inserts, these into two sign extensions and a
  // convert, as the bf16 path's u16 -> u32.
  LanesI8 q;
  std::memcpy(&q, p, sizeof q);
  v = __builtin_convertvector(__builtin_convertvector(__builtin_convertvector(q, LanesI16), LanesI32), Lanes);
}

// What dot_block does per vector of 8 weights: widen them to f32 lanes
// (load_lanes above) and add their products to the accumulators, in the
// same code for every target (target_clones compiles it per target).
struct PortableOps {
  template <typename WT>
  static inline __attribute__((always_inline)) void lanes(const WT* p, Lanes& v) {
    load_lanes(p, v);
  }
  static inline __attribute__((always_inline)) void madd(Lanes& acc, const Lanes& x, const Lanes& y) {
    acc += x * y;
  }
};

// int8 weights on AVX2 with FMA: one vpmovsxbd from memory, one vcvtdq2ps
// and one fused multiply-add per 8 weights. GCC lowers load_lanes'
// vector-extension conversions to about 12 shuffles per 8 weights, all on
// the one shuffle port, and that, not the memory, bounded the decode (2.4
// GB/s of int8 per core); the separate multiply and add then cost a third
// of the rest (in cache, 13 -> 21 GB/s per core with the FMA). The FMA
// rounds once where PortableOps rounds twice, so this kernel's sums differ
// from the portable one's in the last bits (a test bounds them); every
// block still sums each element the same way, so batch invariance holds.
// Not always_inline: GCC inlines that into its caller (dot_block, no
// target) before dot_block reaches an AVX2 function, and refuses the
// mismatch; the AVX2 entry below is `flatten`, which inlines these there.
struct Avx2FmaI8Ops {
  static inline __attribute__((target("avx2,fma"))) void lanes(const std::int8_t* p, Lanes& v) {
    const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    const __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
    std::memcpy(&v, &f, sizeof v);
  }
  static inline __attribute__((target("avx2,fma"))) void madd(Lanes& acc, const Lanes& x, const Lanes& y) {
    __m256 sum, xs, ys;
    std::memcpy(&sum, &acc, sizeof sum);
    std::memcpy(&xs, &x, sizeof xs);
    std::memcpy(&ys, &y, sizeof ys);
    sum = _mm256_fmadd_ps(xs, ys, sum);
    std::memcpy(&acc, &sum, sizeof acc);
  }
};

// out[r][j] = dot(a[r], w[j]) for R rows of A against J rows of W, reading
// each W element once for all R rows (the decode GEMM is bound by W's bytes).
// Every output element is summed the same way whatever R and J are: 8 lanes
// in order of k, the same reduction tree, then the tail. So a row's result
// does not depend on which other rows share its batch, and the AVX2 clone
// of the callers (same lanes, no FMA contraction in ISO C++ mode) gives the
// same bits as the baseline one (int8's Avx2FmaI8Ops fuses them: not so).
// The loops are unrolled by pragma: left as loops, GCC keeps the
// accumulators in memory and runs 4x slower.
//
// `ahead` (up to two W rows, each may be null) is touched along the way so
// that it is in cache by the time a later block needs it: see direct_tile.
template <int R, int J, typename WT, typename Ops>
inline __attribute__((always_inline)) void dot_block(const float* const* a, const WT* const* w, std::int64_t k,
                                                     float (&out)[R][J], const WT* const (&ahead)[2]) {
  Lanes acc[R][J] = {};
  std::int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    if (ahead[0] != nullptr) __builtin_prefetch(ahead[0] + i, 0, 3);
    if (ahead[1] != nullptr) __builtin_prefetch(ahead[1] + i, 0, 3);
    if constexpr (R == 1) {
      // One row: widen each weight vector just before its product, so 8
      // accumulators, the row and one temporary fit the 16 vector
      // registers (loading all J first spilled two accumulators to the
      // stack: int8 at 1 row ran 2x slower in cache). Same sums, same bits.
      Lanes av;
      load_lanes(a[0] + i, av);
      #pragma GCC unroll 8
      for (int j = 0; j < J; ++j) {
        Lanes wv;
        Ops::lanes(w[j] + i, wv);
        Ops::madd(acc[0][j], av, wv);
      }
      continue;
    }
    Lanes wv[J];
    #pragma GCC unroll 8
    for (int j = 0; j < J; ++j) Ops::lanes(w[j] + i, wv[j]);
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      Lanes av;
      load_lanes(a[r] + i, av);
      #pragma GCC unroll 8
      for (int j = 0; j < J; ++j) Ops::madd(acc[r][j], av, wv[j]);
    }
  }
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    #pragma GCC unroll 8
    for (int j = 0; j < J; ++j) {
      const Lanes v = acc[r][j];
      float total = ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
      for (std::int64_t t = i; t < k; ++t) total += a[r][t] * weight_f32(w[j][t]);
      out[r][j] = total;
    }
  }
}

// C[rows, j:j+J] (+)= A[rows] · W[j:j+J]^T for R rows starting at row r0;
// `scales` (int8 W) multiplies each output column by its channel's scale.
template <int R, int J, typename WT, typename Ops>
inline __attribute__((always_inline)) void direct_block(const TensorView& a, const TensorView& w, const TensorView& c,
                                                        std::int64_t r0, std::int64_t j, bool accumulate,
                                                        const float* scales,
                                                        const WT* const (&ahead)[2] = {nullptr, nullptr}) {
  const float* ap[R];
  const WT* wp[J];
  for (int r = 0; r < R; ++r) ap[r] = static_cast<const float*>(a.at(r0 + r));
  for (int q = 0; q < J; ++q) wp[q] = static_cast<const WT*>(w.at(j + q));
  float out[R][J];
  dot_block<R, J, WT, Ops>(ap, wp, a.cols, out, ahead);
  if (scales != nullptr)
    for (int r = 0; r < R; ++r)
      for (int q = 0; q < J; ++q) out[r][q] *= scales[j + q];
  for (int r = 0; r < R; ++r) {
    auto* cp = static_cast<float*>(c.at(r0 + r, j));
    for (int q = 0; q < J; ++q) cp[q] = accumulate ? cp[q] + out[r][q] : out[r][q];
  }
}

// C[:, j0:j1] (+)= A · W[j0:j1]^T for a few rows of A, in register blocks:
// 2 rows of A by 4 rows of W (1 by 8 for a single row: more weight rows in
// flight keep the memory busy), the W rows left over one at a time.
// From 4 rows of A a group of 4 W rows is walked in 2 or more passes (2 rows
// of A each), which read it from L1 while the memory would sit idle; so the
// passes prefetch the next group, one or two of its rows each (measured on
// the LM head at 8 rows: +45%; gate_up at 8 rows: 2x).
template <typename WT, typename Ops = PortableOps>
inline __attribute__((always_inline)) void direct_tile(const TensorView& a, const TensorView& w, const TensorView& c,
                                                       std::int64_t j0, std::int64_t j1, bool accumulate,
                                                       const float* scales) {
  const std::int64_t m = a.rows;
  std::int64_t j = j0;
  if (m == 1)
    for (; j + 8 <= j1; j += 8) direct_block<1, 8, WT, Ops>(a, w, c, 0, j, accumulate, scales);
  for (; j + 4 <= j1; j += 4) {
    std::int64_t r = 0;
    const std::int64_t passes = m / 2;
    for (; r + 2 <= m; r += 2) {
      const WT* ahead[2] = {nullptr, nullptr};
      if (passes >= 2) {
        const std::int64_t p = r / 2, per_pass = passes >= 4 ? 1 : 2;
        for (std::int64_t q = 0; q < per_pass; ++q) {
          const std::int64_t row = j + 4 + p * per_pass + q;
          if (p * per_pass + q < 4 && row < w.rows) ahead[q] = static_cast<const WT*>(w.at(row));
        }
      }
      direct_block<2, 4, WT, Ops>(a, w, c, r, j, accumulate, scales, ahead);
    }
    for (; r < m; ++r) direct_block<1, 4, WT, Ops>(a, w, c, r, j, accumulate, scales);
  }
  for (; j < j1; ++j) {
    std::int64_t r = 0;
    for (; r + 4 <= m; r += 4) direct_block<4, 1, WT, Ops>(a, w, c, r, j, accumulate, scales);
    for (; r < m; ++r) direct_block<1, 1, WT, Ops>(a, w, c, r, j, accumulate, scales);
  }
}

__attribute__((target_clones("avx2", "default"))) void direct_tile_f32(const TensorView& a, const TensorView& w,
                                                                       const TensorView& c, std::int64_t j0,
                                                                       std::int64_t j1, bool accumulate) {
  direct_tile<float>(a, w, c, j0, j1, accumulate, nullptr);
}

__attribute__((target_clones("avx2", "default"))) void direct_tile_bf16(const TensorView& a, const TensorView& w,
                                                                        const TensorView& c, std::int64_t j0,
                                                                        std::int64_t j1, bool accumulate) {
  direct_tile<std::uint16_t>(a, w, c, j0, j1, accumulate, nullptr);
}

// The int8 decode kernel: portable code (the baseline x86-64 target), and
// AVX2 + FMA with its own widening and multiply-add, chosen at run time
// (direct_tile_i8_for).
void direct_tile_i8_portable(const TensorView& a, const TensorView& w, const TensorView& c, std::int64_t j0,
                             std::int64_t j1, bool accumulate, const float* scales) {
  direct_tile<std::int8_t>(a, w, c, j0, j1, accumulate, scales);
}

__attribute__((target("avx2,fma"), flatten)) void direct_tile_i8_avx2_fma(const TensorView& a, const TensorView& w,
                                                                          const TensorView& c, std::int64_t j0,
                                                                          std::int64_t j1, bool accumulate,
                                                                          const float* scales) {
  direct_tile<std::int8_t, Avx2FmaI8Ops>(a, w, c, j0, j1, accumulate, scales);
}

using DirectTileI8 = void (*)(const TensorView&, const TensorView&, const TensorView&, std::int64_t, std::int64_t,
                              bool, const float*);

DirectTileI8 direct_tile_i8_for(CpuKernelIsa isa) {
  return isa == CpuKernelIsa::avx2_fma ? direct_tile_i8_avx2_fma : direct_tile_i8_portable;
}

void add_bias(const TensorView& c, const TensorView& bias) {
  std::vector<float> b(static_cast<std::size_t>(bias.cols));
  convert_to_f32(bias.data, bias.dtype, b.data(), b.size());
  for (std::int64_t r = 0; r < c.rows; ++r) {
    float* row = static_cast<float*>(c.at(r));
    for (std::int64_t j = 0; j < c.cols; ++j) row[j] += b[j];
  }
}

}  // namespace

CpuKernelIsa cpu_best_kernel_isa() {
  static const CpuKernelIsa best = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")
                                       ? CpuKernelIsa::avx2_fma
                                       : CpuKernelIsa::portable;
  return best;
}

void cpu_direct_gemm_i8(CpuKernelIsa isa, const TensorView& a, const TensorView& w, const TensorView& scales,
                        const TensorView& c) {
  GemmOptions options;
  options.w_scales = &scales;
  check_gemm(a, w, c, options);
  if (a.rows > kGemmDirectMaxRows) throw Error("cpu_direct_gemm_i8: " + std::to_string(a.rows) +
                                               " rows of A, the direct kernel takes at most " +
                                               std::to_string(kGemmDirectMaxRows));
  if (isa == CpuKernelIsa::avx2_fma && cpu_best_kernel_isa() != CpuKernelIsa::avx2_fma)
    throw Error("cpu_direct_gemm_i8: this CPU has no AVX2 and FMA");
  direct_tile_i8_for(isa)(a, w, c, 0, w.rows, false, static_cast<const float*>(scales.data));
}

void CpuBackend::gemm(const TensorView& a, const TensorView& w, const TensorView& c, const GemmOptions& options) {
  check_gemm(a, w, c, options);
  if (w.dtype == ElemType::f8e4m3) {
    gemm_fp8(a, w, c, options);
    return;
  }
  gemm_unchecked(a, w, c, options);
}

// The output columns are cut into fixed tiles of kGemmTileCols rows of W and
// the tiles are spread over the pool, each one a single-threaded BLAS call.
// OpenBLAS's own threading changes which micro-kernel handles the edge
// columns, and with it the rounding, when its thread count changes; fixed
// tiles make every C element's arithmetic independent of the thread count.
void CpuBackend::gemm_unchecked(const TensorView& a, const TensorView& w, const TensorView& c,
                                const GemmOptions& options) {
  const std::int64_t m = a.rows, n = w.rows, k = a.cols;
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!options.accumulate) fill(c, 0.0f);
    if (options.bias != nullptr) add_bias(c, *options.bias);
    return;
  }
  const std::int64_t tiles = (n + kGemmTileCols - 1) / kGemmTileCols;
  const float beta = options.accumulate ? 1.0f : 0.0f;
  const auto* ap = static_cast<const float*>(a.data);
  pool_.parallel_for(tiles, [&](std::int64_t t0, std::int64_t t1) {
    thread_local std::vector<float> panel;  // a bf16 tile of W converted to f32
    for (std::int64_t tile = t0; tile < t1; ++tile) {
      const std::int64_t j0 = tile * kGemmTileCols;
      const std::int64_t cols = std::min(kGemmTileCols, n - j0);
      auto* cp = static_cast<float*>(c.at(0, j0));
      if (m <= kGemmDirectMaxRows) {
        if (w.dtype == ElemType::f32) {
          direct_tile_f32(a, w, c, j0, j0 + cols, options.accumulate);
        } else if (w.dtype == ElemType::i8) {
          direct_tile_i8_for(cpu_best_kernel_isa())(a, w, c, j0, j0 + cols, options.accumulate,
                                                    static_cast<const float*>(options.w_scales->data));
        } else {
          direct_tile_bf16(a, w, c, j0, j0 + cols, options.accumulate);
        }
        continue;
      }
      const float* wp = nullptr;
      blasint ldw = 0;
      if (w.dtype == ElemType::f32) {
        wp = static_cast<const float*>(w.at(j0));
        ldw = static_cast<blasint>(w.row_stride);
      } else {
        panel.resize(static_cast<std::size_t>(cols * k));
        for (std::int64_t r = 0; r < cols; ++r) {
          float* row = panel.data() + r * k;
          if (w.dtype == ElemType::i8) {
            // Dequantised once per tile, amortised over the m rows.
            const auto* q = static_cast<const std::int8_t*>(w.at(j0 + r));
            const float scale = static_cast<const float*>(options.w_scales->data)[j0 + r];
            for (std::int64_t i = 0; i < k; ++i) row[i] = static_cast<float>(q[i]) * scale;
          } else {
            convert_to_f32(w.at(j0 + r), w.dtype, row, static_cast<std::size_t>(k));
          }
        }
        wp = panel.data();
        ldw = static_cast<blasint>(k);
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(m), static_cast<blasint>(cols),
                  static_cast<blasint>(k), 1.0f, ap, static_cast<blasint>(a.row_stride), wp, ldw, beta, cp,
                  static_cast<blasint>(c.row_stride));
    }
  });
  if (options.bias != nullptr) add_bias(c, *options.bias);
}

void CpuBackend::moe_topk(const TensorView& router_logits, std::int32_t top_k, bool renormalize,
                          const TensorView& topk_ids, const TensorView& topk_weights) {
  check_moe_topk(router_logits, top_k, topk_ids, topk_weights);
  const std::int64_t experts = router_logits.cols;
  pool_.parallel_for(router_logits.rows, [&](std::int64_t t0, std::int64_t t1) {
    std::vector<float> p(static_cast<std::size_t>(experts));
    std::vector<std::int32_t> order(static_cast<std::size_t>(experts));
    for (std::int64_t t = t0; t < t1; ++t) {
      const float* logits = static_cast<const float*>(router_logits.at(t));
      const float mx = *std::max_element(logits, logits + experts);
      float total = 0.0f;
      for (std::int64_t e = 0; e < experts; ++e) total += (p[e] = std::exp(logits[e] - mx));
      for (auto& x : p) x /= total;
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + top_k, order.end(),
                        [&](std::int32_t x, std::int32_t y) { return p[x] > p[y] || (p[x] == p[y] && x < y); });
      float kept = 0.0f;
      for (std::int32_t j = 0; j < top_k; ++j) kept += p[order[j]];
      auto* ids = static_cast<std::int32_t*>(topk_ids.at(t));
      auto* wts = static_cast<float*>(topk_weights.at(t));
      for (std::int32_t j = 0; j < top_k; ++j) {
        ids[j] = order[j];
        wts[j] = renormalize ? p[order[j]] / kept : p[order[j]];
      }
    }
  });
}

void CpuBackend::moe_experts(const TensorView& x, const TensorView& topk_ids, const TensorView& topk_weights,
                             const ExpertWeights& experts, const TensorView& out) {
  check_moe_experts(x, topk_ids, topk_weights, experts, out);
  const std::span<const TensorView> gate_up = experts.gate_up, down = experts.down;
  const bool scaled = !experts.gate_up_scales.empty();
  const std::int64_t tokens = x.rows, hidden = x.cols, top_k = topk_ids.cols;
  const std::int64_t inter = gate_up[0].rows / 2;
  check_moe_expert_ids(topk_ids, gate_up.size());
  // Group the (token, slot) pairs by expert, in token order.
  std::map<std::int32_t, std::vector<std::int64_t>> by_expert;  // expert -> pair index t * top_k + j
  for (std::int64_t t = 0; t < tokens; ++t) {
    const auto* ids = static_cast<const std::int32_t*>(topk_ids.at(t));
    for (std::int64_t j = 0; j < top_k; ++j) by_expert[ids[j]].push_back(t * top_k + j);
  }
  // Each pair's expert output goes to its own row, then every token sums its
  // rows in slot order: the sum does not depend on how tokens were grouped.
  std::vector<float> pair_out(static_cast<std::size_t>(tokens * top_k * hidden));
  std::vector<float> xs, h2, h;
  for (const auto& [expert, pairs] : by_expert) {
    const auto rows = static_cast<std::int64_t>(pairs.size());
    xs.resize(static_cast<std::size_t>(rows * hidden));
    h2.resize(static_cast<std::size_t>(rows * 2 * inter));
    h.resize(static_cast<std::size_t>(rows * inter));
    for (std::int64_t r = 0; r < rows; ++r) {
      std::memcpy(xs.data() + r * hidden, x.at(pairs[r] / top_k), static_cast<std::size_t>(hidden) * sizeof(float));
    }
    const TensorView xv = make_view(xs.data(), ElemType::f32, rows, hidden);
    const TensorView h2v = make_view(h2.data(), ElemType::f32, rows, 2 * inter);
    const TensorView hv = make_view(h.data(), ElemType::f32, rows, inter);
    std::vector<float> yo(static_cast<std::size_t>(rows * hidden));
    const TensorView yv = make_view(yo.data(), ElemType::f32, rows, hidden);
    const auto e = static_cast<std::size_t>(expert);
    GemmOptions up_options, down_options;
    if (scaled) {
      up_options.w_scales = &experts.gate_up_scales[e];
      down_options.w_scales = &experts.down_scales[e];
    }
    gemm_unchecked(xv, gate_up[e], h2v, up_options);
    silu_and_mul(h2v, hv);
    gemm_unchecked(hv, down[e], yv, down_options);
    for (std::int64_t r = 0; r < rows; ++r) {
      std::memcpy(pair_out.data() + pairs[r] * hidden, yo.data() + r * hidden,
                  static_cast<std::size_t>(hidden) * sizeof(float));
    }
  }
  pool_.parallel_for(tokens, [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      float* o = static_cast<float*>(out.at(t));
      const auto* wts = static_cast<const float*>(topk_weights.at(t));
      std::fill(o, o + hidden, 0.0f);
      for (std::int64_t j = 0; j < top_k; ++j) {
        const float* y = pair_out.data() + (t * top_k + j) * hidden;
        for (std::int64_t c = 0; c < hidden; ++c) o[c] += wts[j] * y[c];
      }
    }
  });
}

}  // namespace twin
