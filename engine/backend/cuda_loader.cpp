#include "engine/backend/cuda_loader.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

namespace twin {
namespace {

#if defined(TWIN_HAVE_CUDA)
constexpr const char* kModuleName = "libtwin_cuda.so";

std::vector<std::string> candidate_paths() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("TWIN_CUDA_MODULE"); env && *env) out.emplace_back(env);
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) out.push_back((exe.parent_path() / kModuleName).string());
#if defined(TWIN_CUDA_MODULE_BUILD_DIR)
  out.push_back(std::string(TWIN_CUDA_MODULE_BUILD_DIR) + "/" + kModuleName);
#endif
  return out;
}
#endif

struct Loaded {
  CudaModule module;
  bool ok = false;
  std::string why;
};

Loaded load() {
  Loaded out;
#if !defined(TWIN_HAVE_CUDA)
  out.why = "not built into this binary (configure with -DTWIN_CUDA=ON on a machine with nvcc)";
  return out;
#else
  std::string tried;
  for (const std::string& path : candidate_paths()) {
    if (!std::filesystem::exists(path)) {
      tried += (tried.empty() ? "" : ", ") + path;
      continue;
    }
    // RTLD_LOCAL: the module's own copies of the shared helpers stay its own.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* err = dlerror();
      out.why = "cannot load " + path + ": " + (err ? err : "unknown error");
      return out;
    }
    auto abi = reinterpret_cast<int (*)()>(dlsym(handle, "twin_cuda_module_abi"));
    out.module.device_count = reinterpret_cast<int (*)(std::string*)>(dlsym(handle, "twin_cuda_device_count"));
    out.module.make_backend = reinterpret_cast<Backend* (*)(int)>(dlsym(handle, "twin_make_cuda_backend"));
    if (!abi || !out.module.device_count || !out.module.make_backend || abi() != kCudaModuleAbi) {
      out.why = path + " is not this build's CUDA module (rebuild it with this twinserve)";
      return out;  // the handle stays open: unloading a half-used module gains nothing
    }
    out.ok = true;
    return out;
  }
  out.why = std::string(kModuleName) + " not found (looked for " + tried + "; set TWIN_CUDA_MODULE to its path)";
  return out;
#endif
}

}  // namespace

const CudaModule* cuda_module(std::string* why) {
  static std::once_flag once;
  static Loaded loaded;
  std::call_once(once, [] { loaded = load(); });
  if (!loaded.ok && why) *why = loaded.why;
  return loaded.ok ? &loaded.module : nullptr;
}

}  // namespace twin
