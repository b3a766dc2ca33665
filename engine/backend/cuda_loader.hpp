#pragma once
// Finds and loads libtwin_cuda.so, the CUDA backend module, on first use.
// Looked for, in order: $TWIN_CUDA_MODULE (a path), beside the running
// executable (an installed or bundled twinserve), and the build tree that
// built this binary (tests and benchmarks run from their own folders).
#include <memory>
#include <string>

#include "engine/backend/backend.hpp"

namespace twin {

// Bumped whenever the Backend interface or these entry points change, so a
// module from another build is refused instead of called.
inline constexpr int kCudaModuleAbi = 1;

struct CudaModule {
  int (*device_count)(std::string* why) = nullptr;
  Backend* (*make_backend)(int device) = nullptr;
};

// The module, loaded once per process; nullptr when it cannot be loaded,
// with the reason in `why` (not built here, not found, a missing CUDA
// library, another build's module).
const CudaModule* cuda_module(std::string* why);

}  // namespace twin
