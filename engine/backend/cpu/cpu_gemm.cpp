// GEMMs on OpenBLAS. f32 weights go straight to SGEMM (SGEMV for one row).
// bf16 weights: for a few rows of A (decode) W is read directly as bf16 and
// converted in registers, which halves the bytes read compared with an f32
// copy; for more rows each tile of W is converted into a small f32 scratch
// that SGEMM consumes, so the conversion is amortised over the rows and no
// full f32 copy of the weights is kept (see docs/engine.md, Backend).
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <string>

#include "engine/backend/cpu/cpu_backend_impl.hpp"
#include "engine/backend/op_checks.hpp"
#include "engine/core/error.hpp"

namespace twin {

namespace {

// Rows of W per tile: small enough to spread an FFN's columns over the
// cores, large enough for SGEMM to run at speed.
constexpr std::int64_t kGemmTileCols = 128;

// Inlined into bf16_direct_tile, which has an AVX2 clone picked at run time:
// same lanes and order in both (and no FMA contraction in ISO C++ mode), so
// identical bits.
inline __attribute__((always_inline)) float dot_bf16(const float* a, const std::uint16_t* w, std::int64_t k) {
  float lane[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    for (int l = 0; l < 8; ++l) lane[l] += a[i + l] * bf16_to_f32(w[i + l]);
  }
  float total = ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
  for (; i < k; ++i) total += a[i] * bf16_to_f32(w[i]);
  return total;
}

// C[:, j0:j1] (+)= A · W[j0:j1]^T reading bf16 W directly: for few rows of A.
__attribute__((target_clones("avx2", "default"))) void bf16_direct_tile(const TensorView& a, const TensorView& w,
                                                                        const TensorView& c, std::int64_t j0,
                                                                        std::int64_t j1, bool accumulate) {
  for (std::int64_t j = j0; j < j1; ++j) {
    const auto* wrow = static_cast<const std::uint16_t*>(w.at(j));
    for (std::int64_t i = 0; i < a.rows; ++i) {
      float* cij = static_cast<float*>(c.at(i, j));
      const float d = dot_bf16(static_cast<const float*>(a.at(i)), wrow, a.cols);
      *cij = accumulate ? *cij + d : d;
    }
  }
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

void CpuBackend::gemm(const TensorView& a, const TensorView& w, const TensorView& c, const GemmOptions& options) {
  check_gemm(a, w, c, options);
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
      const float* wp = nullptr;
      blasint ldw = 0;
      if (w.dtype == ElemType::f32) {
        wp = static_cast<const float*>(w.at(j0));
        ldw = static_cast<blasint>(w.row_stride);
      } else if (m <= kBf16DirectMaxRows) {
        bf16_direct_tile(a, w, c, j0, j0 + cols, options.accumulate);
        continue;
      } else {
        panel.resize(static_cast<std::size_t>(cols * k));
        for (std::int64_t r = 0; r < cols; ++r) {
          convert_to_f32(w.at(j0 + r), w.dtype, panel.data() + r * k, static_cast<std::size_t>(k));
        }
        wp = panel.data();
        ldw = static_cast<blasint>(k);
      }
      if (m == 1) {
        cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<blasint>(cols), static_cast<blasint>(k), 1.0f, wp, ldw,
                    ap, 1, beta, cp, 1);
      } else {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(m), static_cast<blasint>(cols),
                    static_cast<blasint>(k), 1.0f, ap, static_cast<blasint>(a.row_stride), wp, ldw, beta, cp,
                    static_cast<blasint>(c.row_stride));
      }
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
                             std::span<const TensorView> gate_up, std::span<const TensorView> down,
                             const TensorView& out) {
  check_moe_experts(x, topk_ids, topk_weights, gate_up, down, out);
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
    gemm_unchecked(xv, gate_up[expert], h2v, {});
    silu_and_mul(h2v, hv);
    gemm_unchecked(hv, down[expert], yv, {});
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
