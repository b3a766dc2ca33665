// W8A8 fp8 GEMMs through cuBLASLt (fp8 tensor cores: compute capability 8.9
// and newer): A is scaled into E4M3 per row on the device, cuBLASLt
// multiplies the two E4M3 matrices with f32 accumulation into an f32
// product, and a last kernel applies each row's and column's scale (and
// accumulates into C). cuBLASLt's own scale attributes are left at 1: the
// per-token x per-channel scales are ours, applied in that kernel, so the
// path needs nothing newer than per-tensor-scale cuBLASLt. fp8 operands
// must be "TN" (A transposed) with leading dimensions multiples of 16,
// which the engine's row-major layout gives: C^T (n x m) = op_T(W') (n x k)
// x A' (k x m), as in gemm_unchecked. The CUDA-vs-CPU test compares it with
// the CPU's reference (cpu_gemm_fp8.cpp); on an H200 (2026-12-04) it agreed
// within Hopper's fp8 accumulator and ran at 0.49x torch._scaled_mm: the f32
// product's round trip for the scales is the cost (docs/cuda.md).
#include <cstdint>
#include <string>

#include "base/error.hpp"
#include "engine/backend/cuda/cuda_backend_impl.hpp"
#include "engine/backend/cuda/cuda_kernels.hpp"

namespace twin {

namespace {

constexpr std::size_t kLtWorkspaceBytes = std::size_t{32} << 20;  // NVIDIA's recommendation for Hopper

struct LtLayout {
  cublasLtMatrixLayout_t layout = nullptr;
  LtLayout(cudaDataType_t type, std::uint64_t rows, std::uint64_t cols, std::int64_t ld) {
    cublas_check(cublasLtMatrixLayoutCreate(&layout, type, rows, cols, ld), "gemm (fp8): cublasLtMatrixLayoutCreate");
  }
  ~LtLayout() { cublasLtMatrixLayoutDestroy(layout); }
  LtLayout(const LtLayout&) = delete;
  LtLayout& operator=(const LtLayout&) = delete;
};

struct LtDesc {
  cublasLtMatmulDesc_t desc = nullptr;
  LtDesc() {
    cublas_check(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "gemm (fp8): cublasLtMatmulDescCreate");
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    cublas_check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "gemm (fp8): TRANSA");
    cublas_check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "gemm (fp8): TRANSB");
  }
  ~LtDesc() { cublasLtMatmulDescDestroy(desc); }
  LtDesc(const LtDesc&) = delete;
  LtDesc& operator=(const LtDesc&) = delete;
};

}  // namespace

void CudaBackend::gemm_fp8(const TensorView& a, const TensorView& w, const TensorView& c, const GemmOptions& options) {
  const std::int64_t m = a.rows, n = w.rows, k = a.cols;
  if (m == 0 || n == 0) return;
  if (fp8_capability_ < 0) {
    int major = 0, minor = 0;
    cuda_check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_), "compute capability");
    cuda_check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device_), "compute capability");
    fp8_capability_ = major * 10 + minor;
  }
  if (fp8_capability_ < 89) {
    throw Error("gemm: fp8 weights need fp8 tensor cores (compute capability 8.9 or newer); this GPU is " +
                std::to_string(fp8_capability_ / 10) + "." + std::to_string(fp8_capability_ % 10) +
                " (on an A100 vLLM runs fp8 weight-only; here use bf16 or int8)");
  }
  if (k % 16 != 0 || w.row_stride % 16 != 0) {
    throw Error("gemm: fp8 GEMMs need k and W's row stride to be multiples of 16 (cuBLASLt), got k " +
                std::to_string(k) + ", stride " + std::to_string(w.row_stride));
  }
  if (cublas_lt_ == nullptr) cublas_check(cublasLtCreate(&cublas_lt_), "cublasLtCreate");

  // Workspace: A in E4M3 [m, k], its row scales [m], the f32 product [m, n].
  const std::size_t q_bytes = static_cast<std::size_t>(m * k + 255) / 256 * 256;
  const std::size_t s_bytes = static_cast<std::size_t>(m) * sizeof(float);
  auto* base = static_cast<char*>(fp8_a_.ensure(q_bytes + s_bytes, stream_, "gemm (fp8 A)"));
  auto* aq = reinterpret_cast<std::uint8_t*>(base);
  auto* a_scale = reinterpret_cast<float*>(base + q_bytes);
  auto* product = static_cast<float*>(fp8_product_.ensure(static_cast<std::size_t>(m * n) * sizeof(float), stream_,
                                                           "gemm (fp8 product)"));
  void* workspace = lt_workspace_.ensure(kLtWorkspaceBytes, stream_, "gemm (cuBLASLt workspace)");

  cuda::launch_quantize_rows_fp8(static_cast<const float*>(a.data), a.row_stride, m, k, aq, a_scale, stream_);
  after_launch("gemm (A to fp8)");

  const LtDesc desc;
  const LtLayout lw(CUDA_R_8F_E4M3, static_cast<std::uint64_t>(k), static_cast<std::uint64_t>(n), w.row_stride);
  const LtLayout la(CUDA_R_8F_E4M3, static_cast<std::uint64_t>(k), static_cast<std::uint64_t>(m), k);
  const LtLayout lp(CUDA_R_32F, static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(m), n);
  const Fp8GemmShape shape{m, n, k, w.row_stride};
  auto found = fp8_algos_.find(shape);
  if (found == fp8_algos_.end()) {
    cublasLtMatmulPreference_t pref = nullptr;
    cublas_check(cublasLtMatmulPreferenceCreate(&pref), "gemm (fp8): cublasLtMatmulPreferenceCreate");
    const std::size_t ws = kLtWorkspaceBytes;
    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    cublasStatus_t status =
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = cublasLtMatmulAlgoGetHeuristic(cublas_lt_, desc.desc, lw.layout, la.layout, lp.layout, lp.layout, pref,
                                              1, &result, &count);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    cublas_check(status, "gemm (fp8): cublasLtMatmulAlgoGetHeuristic");
    if (count == 0) {
      throw Error("gemm: cuBLASLt has no fp8 algorithm for m " + std::to_string(m) + ", n " + std::to_string(n) +
                  ", k " + std::to_string(k));
    }
    found = fp8_algos_.emplace(shape, result.algo).first;
  }
  const float alpha = 1.0f, beta = 0.0f;
  cublas_check(cublasLtMatmul(cublas_lt_, desc.desc, &alpha, w.data, lw.layout, aq, la.layout, &beta, product,
                              lp.layout, product, lp.layout, &found->second, workspace, kLtWorkspaceBytes, stream_),
               "gemm (fp8 W, cublasLtMatmul)");
  cuda::launch_fp8_scale_out(product, m, n, a_scale, static_cast<const float*>(options.w_scales->data),
                             static_cast<float*>(c.data), c.row_stride, options.accumulate, stream_);
  after_launch("gemm (fp8 scales)");
}

}  // namespace twin
