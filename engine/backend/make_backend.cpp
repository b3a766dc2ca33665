#include <string>

#include "engine/backend/backend.hpp"
#include "engine/backend/cpu/cpu_backend.hpp"
#include "engine/core/error.hpp"

namespace twin {

std::unique_ptr<Backend> make_backend(const std::string& name, const BackendOptions& options) {
  // The CUDA backend (issue 8) adds its branch here; "auto" falls back to the CPU.
  if (name == "cpu" || name == "auto") return make_cpu_backend(options.threads);
  if (name == "cuda") throw Error("backend 'cuda' is not built into this binary (configure with -DTWIN_CUDA=ON on a machine with nvcc)");
  throw UsageError("unknown backend '" + name + "' (known: auto, cpu, cuda)");
}

}  // namespace twin
