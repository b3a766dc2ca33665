// The entry points of libtwin_cuda.so, the CUDA backend as a module that
// make_backend loads only when a command asks for the GPU (cuda_loader.hpp):
// programs that never touch a GPU neither map cuBLAS (hundreds of MB of
// address space) nor pay for initialising it, and they start where the CUDA
// runtime is not installed at all. C linkage: dlsym finds them by name.
#include <memory>
#include <string>

#include "engine/backend/cuda/cuda_backend.hpp"
#include "engine/backend/cuda_loader.hpp"

extern "C" {

__attribute__((visibility("default"))) int twin_cuda_module_abi() { return twin::kCudaModuleAbi; }

__attribute__((visibility("default"))) int twin_cuda_device_count(std::string* why) {
  return twin::cuda_device_count(why);
}

// Ownership passes to the caller, which deletes through Backend's virtual
// destructor (one C++ runtime in the process, so one operator delete).
__attribute__((visibility("default"))) twin::Backend* twin_make_cuda_backend(int device) {
  return twin::make_cuda_backend(device).release();
}

}  // extern "C"
