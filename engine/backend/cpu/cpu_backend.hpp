#pragma once
// The CPU backend: fp32 compute, OpenBLAS SGEMM for the GEMMs, everything
// else on a thread pool of its own, split by rows, sequences and heads so the
// results do not depend on the thread count. It is the reference the other
// backends are checked against.
#include <cstdint>
#include <memory>

#include "engine/backend/backend.hpp"

namespace twin {

// Rows of A at or below which a GEMM runs our own register-blocked kernel,
// which reads each weight once for all the rows (decode is bound by the
// weights' bytes; OpenBLAS's SGEMM packs W first and runs at a fraction of
// its speed on so few rows). Above it: SGEMM, bf16 W converted panel by panel.
inline constexpr std::int64_t kGemmDirectMaxRows = 8;

// The instruction sets the int8 decode kernel is built for, chosen at run
// time so that one binary runs on any x86-64: AVX2 with FMA where the CPU
// has both, else portable code. The FMA rounds each multiply-add once, so
// the two differ in the last bits; each is deterministic and batch-invariant.
enum class CpuKernelIsa { portable, avx2_fma };
CpuKernelIsa cpu_best_kernel_isa();

// C = A · (W x scales)^T on the direct int8 kernel for `isa` (A f32 with at
// most kGemmDirectMaxRows rows, W int8, one f32 scale per row of W), on the
// calling thread. The backend's gemm runs it through cpu_best_kernel_isa();
// this entry lets a test run each kernel on the same inputs. Throws for an
// `isa` this CPU lacks or too many rows.
void cpu_direct_gemm_i8(CpuKernelIsa isa, const TensorView& a, const TensorView& w, const TensorView& scales,
                        const TensorView& c);

// threads <= 0: one per hardware thread.
std::unique_ptr<Backend> make_cpu_backend(std::int32_t threads = 0);

}  // namespace twin
