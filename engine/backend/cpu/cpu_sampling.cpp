#include <string>

#include "base/error.hpp"
#include "engine/backend/cpu/cpu_backend_impl.hpp"
#include "engine/backend/op_checks.hpp"
#include "engine/backend/sampling.hpp"

namespace twin {

void CpuBackend::sample(const TensorView& logits, std::span<const SamplingParams> params,
                        std::span<TokenId> out_tokens) {
  check_sample(logits, params, out_tokens);
  pool_.parallel_for(logits.rows, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      out_tokens[r] = sample_reference(static_cast<const float*>(logits.at(r)), logits.cols, params[r]);
    }
  });
}

}  // namespace twin
