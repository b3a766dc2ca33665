// Main of the GPU tests: where no CUDA device can be used, say why and exit
// 77, which CTest reports as SKIPPED (SKIP_RETURN_CODE), not passed.
// Listing the tests (CTest's discovery at build time) needs no device.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstring>
#include <iostream>
#include <string>

#include "engine/backend/cuda/cuda_backend.hpp"

int main(int argc, char** argv) {
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing = listing || std::strncmp(argv[i], "--list", 6) == 0;
  if (!listing) {
    std::string why;
    if (twin::cuda_device_count(&why) == 0) {
      std::cout << "SKIPPED: no usable CUDA device here (" << why << ")\n";
      return 77;
    }
  }
  return Catch::Session().run(argc, argv);
}
