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

// threads <= 0: one per hardware thread.
std::unique_ptr<Backend> make_cpu_backend(std::int32_t threads = 0);

}  // namespace twin
