#include <string>

#include "base/error.hpp"
#include "engine/backend/backend.hpp"
#include "engine/backend/cpu/cpu_backend.hpp"
#include "engine/backend/cuda_loader.hpp"

namespace twin {

std::unique_ptr<Backend> make_backend(const std::string& name, const BackendOptions& options) {
  if (name == "cpu") return make_cpu_backend(options.threads);
  if (name != "cuda" && name != "auto") throw UsageError("unknown backend '" + name + "' (known: auto, cpu, cuda)");
  // The CUDA module is loaded only here, when a command asks for it.
  std::string why;
  const CudaModule* cuda = cuda_module(&why);
  if (name == "auto") {
    // No module, no device or no driver: the CPU, silently, as "auto" promises.
    if (cuda && cuda->device_count(nullptr) > 0) return std::unique_ptr<Backend>(cuda->make_backend(0));
    return make_cpu_backend(options.threads);
  }
  if (!cuda) throw Error("backend 'cuda': " + why);
  if (cuda->device_count(&why) == 0) {
    throw Error("backend 'cuda': no usable CUDA device here (" + why + "); use --backend cpu or auto");
  }
  return std::unique_ptr<Backend>(cuda->make_backend(0));
}

}  // namespace twin
