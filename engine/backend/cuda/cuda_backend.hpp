#pragma once
// The CUDA backend: cuBLAS for the GEMMs (bf16 weights, fp32 accumulation),
// kernels of our own for everything else (cuda_kernels.cu,
// cuda_attention.cu). Plain C++ header: make_backend.cpp includes it without
// the CUDA headers. See docs/cuda.md.
#include <memory>
#include <string>

#include "engine/backend/backend.hpp"

namespace twin {

// CUDA devices usable here. 0 when there is none or no driver; `why` (if
// given) then gets the runtime's reason, e.g. "CUDA driver version is
// insufficient for CUDA runtime version".
int cuda_device_count(std::string* why = nullptr);

// A backend on device `device`. Throws twin::Error naming the reason when the
// device cannot be used.
std::unique_ptr<Backend> make_cuda_backend(int device = 0);

}  // namespace twin
