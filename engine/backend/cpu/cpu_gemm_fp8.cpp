// W8A8 fp8 GEMM on the CPU: the reference for the CUDA backend's cuBLASLt
// path, not a fast path. A is scaled into E4M3 per row (per token) as the
// GPU does it (engine/backend/fp8_rows.hpp); the product of the two fp8
// matrices is taken in f32 over their unscaled values (each product of two
// E4M3 values is exact in f32), then each element is multiplied by its row's
// and column's scales. W is widened to f32 per call, which costs n x k x 4
// bytes of memory and time: fine for the test models, slow for large ones.
#include <cstdint>
#include <vector>

#include "engine/backend/cpu/cpu_backend_impl.hpp"
#include "engine/backend/fp8_rows.hpp"

namespace twin {

void CpuBackend::gemm_fp8(const TensorView& a, const TensorView& w, const TensorView& c, const GemmOptions& options) {
  const std::int64_t m = a.rows, n = w.rows, k = a.cols;
  if (m == 0 || n == 0) return;
  std::vector<float> aq(static_cast<std::size_t>(m * k)), a_scale(static_cast<std::size_t>(m));
  std::vector<float> wf(static_cast<std::size_t>(n * k)), product(static_cast<std::size_t>(m * n));
  pool_.parallel_for(m, [&](std::int64_t r0, std::int64_t r1) {
    std::vector<std::uint8_t> q(static_cast<std::size_t>(k));
    for (std::int64_t r = r0; r < r1; ++r) {
      const auto* x = static_cast<const float*>(a.at(r));
      a_scale[r] = fp8_row_scale(x, k);
      quantize_row_fp8(x, k, a_scale[r], q.data());
      convert_to_f32(q.data(), ElemType::f8e4m3, aq.data() + r * k, static_cast<std::size_t>(k));
    }
  });
  pool_.parallel_for(n, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      convert_to_f32(w.at(r), ElemType::f8e4m3, wf.data() + r * k, static_cast<std::size_t>(k));
    }
  });
  gemm_unchecked(make_view(aq.data(), ElemType::f32, m, k), make_view(wf.data(), ElemType::f32, n, k),
                 make_view(product.data(), ElemType::f32, m, n), GemmOptions{});
  const auto* w_scale = static_cast<const float*>(options.w_scales->data);
  for (std::int64_t r = 0; r < m; ++r) {
    auto* out = static_cast<float*>(c.at(r));
    const float* p = product.data() + r * n;
    for (std::int64_t j = 0; j < n; ++j) {
      const float v = p[j] * a_scale[r] * w_scale[j];
      out[j] = options.accumulate ? out[j] + v : v;
    }
  }
  if (options.bias != nullptr) {
    std::vector<float> b(static_cast<std::size_t>(n));
    convert_to_f32(options.bias->data, options.bias->dtype, b.data(), b.size());
    for (std::int64_t r = 0; r < m; ++r) {
      auto* out = static_cast<float*>(c.at(r));
      for (std::int64_t j = 0; j < n; ++j) out[j] += b[j];
    }
  }
}

}  // namespace twin
