#pragma once
// A CPU and a CUDA backend side by side, for op-by-op comparisons.
#include <memory>

#include "engine/backend/backend.hpp"
#include "engine/backend/cuda/cuda_backend.hpp"
#include "tests/backend/backend_test_util.hpp"

namespace twin::test {

struct BackendPair {
  std::unique_ptr<Backend> cpu = make_backend("cpu", BackendOptions{2});
  std::unique_ptr<Backend> gpu = make_cuda_backend(0);
};

// Largest |a - b| / (1 + |b|): absolute near zero, relative for large values.
inline double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]) / (1.0 + std::abs(static_cast<double>(b[i]))));
  }
  return m;
}

}  // namespace twin::test
