// The two kernels around the W8A8 fp8 GEMM (cuda_gemm_fp8.cpp): activations
// scaled into E4M3 per row before cuBLASLt, and the per-row x per-column
// scales applied after it. Both mirror engine/backend/fp8_rows.hpp and the
// CPU's cpu_gemm_fp8.cpp, so the two backends quantise to the same bytes.
// The CUDA-vs-CPU test (tests/backend_cuda) is the check; it ran on an H200
// (2026-12-04), within Hopper's fp8 accumulation precision.
#include "engine/backend/cuda/cuda_device_util.cuh"
#include "engine/backend/cuda/cuda_kernels.hpp"

namespace twin::cuda {

namespace {

constexpr float kE4m3Max = 448.0f;

// One block per row: its largest magnitude, its scale, the row in E4M3.
__global__ void __launch_bounds__(kThreads) quantize_rows_fp8_kernel(const float* a, std::int64_t lda, std::int64_t k,
                                                                     std::uint8_t* q, float* scales) {
  __shared__ float scratch[32];
  const std::int64_t row = blockIdx.x;
  const float* x = a + row * lda;
  float top = 0.0f;
  for (std::int64_t i = threadIdx.x; i < k; i += blockDim.x) top = fmaxf(top, fabsf(x[i]));
  top = block_max(top, scratch);
  const float scale = top > 0.0f && isfinite(top) ? __fdiv_rn(top, kE4m3Max) : 1.0f;
  if (threadIdx.x == 0) scales[row] = scale;
  const float inv = __fdiv_rn(1.0f, scale);
  for (std::int64_t i = threadIdx.x; i < k; i += blockDim.x) q[row * k + i] = f32_to_fp8(__fmul_rn(x[i], inv));
}

// c[r, j] (+)= product[r, j] x row_scale[r] x col_scale[j], in that order,
// without fused multiply-adds (as the CPU computes it).
__global__ void fp8_scale_out_kernel(const float* product, std::int64_t m, std::int64_t n, const float* row_scale,
                                     const float* col_scale, float* c, std::int64_t ldc, bool accumulate) {
  TWIN_GRID_STRIDE(i, m * n) {
    const std::int64_t r = i / n, j = i % n;
    const float v = __fmul_rn(__fmul_rn(product[i], row_scale[r]), col_scale[j]);
    float* out = c + r * ldc + j;
    *out = accumulate ? __fadd_rn(*out, v) : v;
  }
}

}  // namespace

void launch_quantize_rows_fp8(const float* a, std::int64_t lda, std::int64_t m, std::int64_t k, std::uint8_t* q,
                              float* scales, cudaStream_t stream) {
  if (m == 0) return;
  quantize_rows_fp8_kernel<<<static_cast<unsigned>(m), kThreads, 0, stream>>>(a, lda, k, q, scales);
}

void launch_fp8_scale_out(const float* product, std::int64_t m, std::int64_t n, const float* row_scale,
                          const float* col_scale, float* c, std::int64_t ldc, bool accumulate, cudaStream_t stream) {
  if (m * n == 0) return;
  fp8_scale_out_kernel<<<grid_for(m * n), kThreads, 0, stream>>>(product, m, n, row_scale, col_scale, c, ldc,
                                                                  accumulate);
}

}  // namespace twin::cuda
