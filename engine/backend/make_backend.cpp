#include <string>

#include "base/error.hpp"
#include "engine/backend/backend.hpp"
#include "engine/backend/cpu/cpu_backend.hpp"
#if defined(TWIN_HAVE_CUDA)
#include "engine/backend/cuda/cuda_backend.hpp"
#endif

namespace twin {

std::unique_ptr<Backend> make_backend(const std::string& name, const BackendOptions& options) {
  if (name == "cpu") return make_cpu_backend(options.threads);
#if defined(TWIN_HAVE_CUDA)
  if (name == "cuda") {
    std::string why;
    if (cuda_device_count(&why) == 0) {
      throw Error("backend 'cuda': no usable CUDA device here (" + why + "); use --backend cpu or auto");
    }
    return make_cuda_backend(0);
  }
  if (name == "auto") {
    // No device or no driver: the CPU, silently, as "auto" promises.
    if (cuda_device_count(nullptr) > 0) return make_cuda_backend(0);
    return make_cpu_backend(options.threads);
  }
#else
  if (name == "auto") return make_cpu_backend(options.threads);
  if (name == "cuda") throw Error("backend 'cuda' is not built into this binary (configure with -DTWIN_CUDA=ON on a machine with nvcc)");
#endif
  throw UsageError("unknown backend '" + name + "' (known: auto, cpu, cuda)");
}

}  // namespace twin
