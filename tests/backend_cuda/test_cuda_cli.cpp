// `--backend cuda` on a machine without a usable device (or a build without
// CUDA) fails with a clear message and a non-zero exit; `--backend auto`
// falls back to the CPU there.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/run_cli.hpp"
#include "tests/support/skip.hpp"
#if defined(TWIN_HAVE_CUDA)
#include "engine/backend/cuda/cuda_backend.hpp"
#endif

namespace fs = std::filesystem;
using twin::test::run_twinserve;

namespace {

bool device_present() {
#if defined(TWIN_HAVE_CUDA)
  return twin::cuda_device_count() > 0;
#else
  return false;
#endif
}

std::string small_trace(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("twin_backend_cuda_cli_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string trace = (dir / "t.jsonl").string();
  REQUIRE(run_twinserve("trace generate --requests 2 --rate 100 --prompt uniform:4:8 --output uniform:2:3 --seed 1 " +
                        trace)
              .exit_code == 0);
  return trace;
}

}  // namespace

TEST_CASE("run --backend cuda without a usable device exits 1 and says why") {
  if (device_present()) TWIN_SKIP("a CUDA device is present: the no-device message cannot be checked here");
  const std::string trace = small_trace("cuda");
  const auto r = run_twinserve("run --trace " + trace + " --model tiny --asap --threads 1 --backend cuda", true);
  INFO(r.out);
  CHECK(r.exit_code == 1);
#if defined(TWIN_HAVE_CUDA)
  CHECK(r.out.find("backend 'cuda': no usable CUDA device here") != std::string::npos);
#else
  CHECK(r.out.find("backend 'cuda': not built into this binary") != std::string::npos);
#endif
}

TEST_CASE("run --backend auto falls back to the cpu without a device") {
  if (device_present()) TWIN_SKIP("a CUDA device is present: auto picks it, nothing to check here");
  const std::string trace = small_trace("auto");
  const auto r = run_twinserve("run --trace " + trace + " --model tiny --asap --threads 1 --backend auto", true);
  INFO(r.out);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("cpu") != std::string::npos);
}

// The CUDA backend is a module loaded on demand: a file that is not one is
// refused by name, and a command that needs no GPU never looks for it.
TEST_CASE("a CUDA module that cannot be loaded is named, and commands without a GPU do not load it") {
  const std::string trace = small_trace("module");  // a fresh folder; the bogus module goes beside the trace
  const fs::path bogus = fs::path(trace).parent_path() / "libtwin_cuda.so";
  { std::ofstream(bogus) << "not a shared object\n"; }
  ::setenv("TWIN_CUDA_MODULE", bogus.c_str(), 1);
  const auto cuda = run_twinserve("run --trace " + trace + " --model tiny --asap --threads 1 --backend cuda", true);
  const auto cpu = run_twinserve("run --trace " + trace + " --model tiny --asap --threads 1 --backend cpu", true);
  ::unsetenv("TWIN_CUDA_MODULE");
  INFO(cuda.out);
  CHECK(cuda.exit_code == 1);
#if defined(TWIN_HAVE_CUDA)
  CHECK(cuda.out.find("cannot load " + bogus.string()) != std::string::npos);
#else
  CHECK(cuda.out.find("not built into this binary") != std::string::npos);
#endif
  INFO(cpu.out);
  CHECK(cpu.exit_code == 0);
}
