#include "serve/step_backends.hpp"

#include <algorithm>
#include <string>

#include "base/error.hpp"

namespace twin {

void EngineStepBackend::admit(RequestId id, const RequestExtras& extras) {
  RequestSampling s;
  s.temperature = extras.temperature;
  s.top_k = extras.top_k;
  s.top_p = extras.top_p;
  s.seed = extras.seed_given ? extras.seed : default_seed_;
  executor_.set_request_sampling(id, s);
}

StepTiming EngineStepBackend::run_step(std::int32_t, const StepPlan& plan, const Replica& replica, Time now,
                                       StepResult& result) {
  result = executor_.execute(plan, replica);
  const Time done = std::max(clock_.now(), now + 1);  // strictly after the plan, as a simulated step
  return StepTiming{done, done};
}

TokenId EngineStepBackend::token(RequestId id, std::int32_t index) const {
  const std::vector<TokenId>* out = executor_.output_tokens(id);
  if (!out || index < 0 || static_cast<std::size_t>(index) >= out->size()) {
    throw Error("serve: request " + std::to_string(id) + " has no output token " + std::to_string(index));
  }
  return (*out)[static_cast<std::size_t>(index)];
}

StepTiming PacedStepBackend::run_step(std::int32_t index, const StepPlan& plan, const Replica& replica, Time now,
                                      StepResult& result) {
  return pricing_->run_step(index, plan, replica, now, result);
}

TokenId PacedStepBackend::token(RequestId id, std::int32_t index) const {
  // splitmix64 over (seed, request, index): the same letters every run.
  std::uint64_t x = seed_ ^ (static_cast<std::uint64_t>(id) * 0x9E3779B97F4A7C15ULL) ^
                    (static_cast<std::uint64_t>(index) * 0xC2B2AE3D27D4EB4FULL);
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  x ^= x >> 31;
  const std::uint64_t c = x % 27;
  return tokenizer_.byte_token(static_cast<std::uint8_t>(c == 26 ? ' ' : 'a' + c));
}

}  // namespace twin
