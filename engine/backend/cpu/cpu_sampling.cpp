#include <string>

#include "engine/backend/cpu/cpu_backend_impl.hpp"
#include "engine/backend/op_checks.hpp"
#include "engine/backend/sampling.hpp"
#include "engine/core/error.hpp"

namespace twin {

void CpuBackend::sample(const TensorView& logits, std::span<const SamplingParams> params,
                        std::span<TokenId> out_tokens) {
  check_dtype("sample", "logits", logits, {ElemType::f32});
  if (static_cast<std::int64_t>(params.size()) != logits.rows || out_tokens.size() != params.size()) {
    throw Error("sample: logits " + shape_str(logits) + " with " + std::to_string(params.size()) +
                " parameter sets and " + std::to_string(out_tokens.size()) + " outputs; expected one per row");
  }
  pool_.parallel_for(logits.rows, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      out_tokens[r] = sample_reference(static_cast<const float*>(logits.at(r)), logits.cols, params[r]);
    }
  });
}

}  // namespace twin
