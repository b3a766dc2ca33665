// Weight-only int8 GEMM (i8 W with per-channel f32 scales) against the loop
// reference on the dequantised weights, on the direct (decode) kernel and
// the panel (SGEMM) path; and against the float weights it quantised, within
// the quantisation's error bound. The AVX2+FMA decode kernel against the
// portable one, and each row against itself alone.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/backend/cpu/cpu_backend.hpp"
#include "tests/backend/backend_test_util.hpp"
#include "tests/support/skip.hpp"

using namespace twin;
using namespace twin::test;

namespace {

struct Quantized {
  std::vector<std::int8_t> q;
  std::vector<float> scales;
  std::vector<float> dequantized;
};

// Symmetric per row, as the runtime quantises: scale = max |w| / 127.
Quantized quantize(const std::vector<float>& w, std::int64_t n, std::int64_t k) {
  Quantized out;
  out.q.resize(w.size());
  out.dequantized.resize(w.size());
  for (std::int64_t j = 0; j < n; ++j) {
    float top = 0.0f;
    for (std::int64_t x = 0; x < k; ++x) top = std::max(top, std::fabs(w[j * k + x]));
    const float scale = top > 0 ? top / 127.0f : 1.0f;
    out.scales.push_back(scale);
    for (std::int64_t x = 0; x < k; ++x) {
      const auto q = static_cast<std::int8_t>(std::clamp(std::nearbyint(w[j * k + x] / scale), -127.0f, 127.0f));
      out.q[j * k + x] = q;
      out.dequantized[j * k + x] = static_cast<float>(q) * scale;
    }
  }
  return out;
}

std::vector<double> reference(const std::vector<float>& a, const std::vector<float>& w, std::int64_t m, std::int64_t n,
                              std::int64_t k) {
  std::vector<double> c(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::int64_t x = 0; x < k; ++x) s += static_cast<double>(a[i * k + x]) * w[j * k + x];
      c[i * n + j] = s;
    }
  return c;
}

}  // namespace

TEST_CASE("int8 gemm equals the dequantised f32 reference on the direct and panel paths", "[int8]") {
  auto be = make_cpu_backend(2);
  // 1-8 rows: the direct kernel (8 weight rows a block at 1 row, edges of 4
  // and 1); 9 and 40: dequantised panels into SGEMM. k = 67 leaves a tail.
  for (auto [m, n, k] : {std::tuple{1, 37, 67}, {2, 9, 64}, {5, 130, 67}, {8, 33, 128}, {9, 130, 67}, {40, 48, 96}}) {
    CAPTURE(m, n, k);
    const auto a = random_floats(m * k, 11), w = random_floats(n * k, 12, 0.1f);
    const Quantized qw = quantize(w, n, k);
    auto da = to_device(*be, a, m, k);
    auto dw = to_device(*be, qw.q, ElemType::i8, n, k);
    auto ds = to_device(*be, qw.scales, 1, n);
    auto dc = zeros(*be, m, n);
    GemmOptions o;
    o.w_scales = &ds.view;
    be->gemm(da.view, dw.view, dc.view, o);
    const std::vector<float> c = to_host(*be, dc.view);
    const std::vector<double> ref = reference(a, qw.dequantized, m, n, k);
    const std::vector<double> exact = reference(a, w, m, n, k);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        const std::size_t at = static_cast<std::size_t>(i * n + j);
        // Against the dequantised weights: f32 rounding only (sums of k
        // products of magnitude <= 0.1): 1e-5 absolute.
        CHECK(std::fabs(c[at] - ref[at]) < 1e-5);
        // Against the float weights: each weight is off by at most half a
        // scale step, so |error| <= scale_j / 2 * sum |a|.
        double sum_a = 0;
        for (std::int64_t x = 0; x < k; ++x) sum_a += std::fabs(a[i * k + x]);
        CHECK(std::fabs(c[at] - exact[at]) <= qw.scales[j] / 2 * sum_a + 1e-5);
      }
  }
}

TEST_CASE("int8 gemm needs its scales, and scales need int8 weights", "[int8]") {
  auto be = make_cpu_backend(1);
  auto da = to_device(*be, random_floats(4, 1), 1, 4);
  auto dw = to_device(*be, std::vector<std::int8_t>(8, 1), ElemType::i8, 2, 4);
  auto dwf = to_device(*be, random_floats(8, 2), 2, 4);
  auto ds = to_device(*be, std::vector<float>{1.0f, 2.0f}, 1, 2);
  auto dc = zeros(*be, 1, 2);
  CHECK_THROWS_WITH(be->gemm(da.view, dw.view, dc.view), Catch::Contains("no w_scales"));
  GemmOptions o;
  o.w_scales = &ds.view;
  CHECK_THROWS_WITH(be->gemm(da.view, dwf.view, dc.view, o), Catch::Contains("float W"));
  be->gemm(da.view, dw.view, dc.view, o);
}

TEST_CASE("the AVX2+FMA int8 decode kernel matches the portable kernel and is batch-invariant", "[int8]") {
  if (cpu_best_kernel_isa() != CpuKernelIsa::avx2_fma)
    TWIN_SKIP("this CPU has no AVX2 and FMA: only the portable kernel runs");
  auto be = make_cpu_backend(2);
  // Rows 1-8 cover every register block (1x8, 2x4, 1x4, 4x1, 1x1); k = 67
  // and 775 leave tails, k = 768 is the `small` model's hidden size.
  for (auto [m, n, k] : {std::tuple{1, 45, 67}, {1, 130, 768}, {2, 9, 64}, {3, 7, 775}, {5, 130, 67}, {8, 37, 128}}) {
    CAPTURE(m, n, k);
    const auto a = random_floats(m * k, 21), w = random_floats(n * k, 22, 0.1f);
    const Quantized qw = quantize(w, n, k);
    auto da = to_device(*be, a, m, k);
    auto dw = to_device(*be, qw.q, ElemType::i8, n, k);
    auto ds = to_device(*be, qw.scales, 1, n);
    auto portable = zeros(*be, m, n), fused = zeros(*be, m, n), backend = zeros(*be, m, n);
    cpu_direct_gemm_i8(CpuKernelIsa::portable, da.view, dw.view, ds.view, portable.view);
    cpu_direct_gemm_i8(CpuKernelIsa::avx2_fma, da.view, dw.view, ds.view, fused.view);
    GemmOptions o;
    o.w_scales = &ds.view;
    be->gemm(da.view, dw.view, backend.view, o);
    const std::vector<float> p = to_host(*be, portable.view), f = to_host(*be, fused.view);
    const std::vector<float> b = to_host(*be, backend.view);
    // The backend runs the fused kernel.
    CHECK(std::memcmp(f.data(), b.data(), f.size() * sizeof(float)) == 0);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        const std::size_t at = static_cast<std::size_t>(i * n + j);
        // The two kernels round differently (one rounding per multiply-add
        // against two). Each is within about (2 k + 8) x 2^-24 x scale x
        // sum |a q| of the exact dot (k steps along the lanes, the 3-level
        // reduction tree, the scale), so they agree within (k + 4) x 2^-22
        // x that; the drift seen on 768-long rows is under 1e-3 of it, and
        // the bound is far below the quantisation's own error.
        double sum_aq = 0;
        for (std::int64_t x = 0; x < k; ++x) sum_aq += std::fabs(a[i * k + x] * qw.q[j * k + x]);
        CHECK(std::fabs(double(f[at]) - p[at]) <= double(k + 4) * 0x1p-22 * qw.scales[j] * sum_aq);
      }
    // Each row's result does not depend on the other rows in its batch.
    for (std::int64_t i = 0; i < m; ++i) {
      CAPTURE(i);
      const std::vector<float> row(a.begin() + i * k, a.begin() + (i + 1) * k);
      auto dr = to_device(*be, row, 1, k);
      auto alone = zeros(*be, 1, n);
      cpu_direct_gemm_i8(CpuKernelIsa::avx2_fma, dr.view, dw.view, ds.view, alone.view);
      const std::vector<float> r = to_host(*be, alone.view);
      CHECK(std::memcmp(r.data(), f.data() + i * n, r.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("the direct int8 kernel refuses too many rows", "[int8]") {
  auto be = make_cpu_backend(1);
  const std::int64_t m = kGemmDirectMaxRows + 1;
  auto da = to_device(*be, random_floats(m * 4, 1), m, 4);
  auto dw = to_device(*be, std::vector<std::int8_t>(8, 1), ElemType::i8, 2, 4);
  auto ds = to_device(*be, std::vector<float>{1.0f, 2.0f}, 1, 2);
  auto dc = zeros(*be, m, 2);
  CHECK_THROWS_WITH(cpu_direct_gemm_i8(CpuKernelIsa::portable, da.view, dw.view, ds.view, dc.view),
                    Catch::Contains("at most 8"));
}
