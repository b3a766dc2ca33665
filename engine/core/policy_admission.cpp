// The built-in admission reserves (policy_list.hpp registers them).
#include "engine/core/policy.hpp"

namespace twin {

namespace {

// Only what this step allocates must fit (vLLM v1 before 0.19).
class ChunkReserve final : public AdmissionPolicy {
 public:
  std::int32_t must_fit(const AdmissionCandidate&) const override { return 0; }
};

// The whole prompt, with the outputs so far when resumed: vLLM 0.19's
// scheduler_reserve_full_isl.
class PromptReserve final : public AdmissionPolicy {
 public:
  std::int32_t must_fit(const AdmissionCandidate& c) const override { return c.known_tokens; }
};

// Prompt and every output token it may produce: TensorRT-LLM's
// GUARANTEED_NO_EVICT, which never preempts. The last output token is
// sampled, never written: prompt + output - 1.
class SequenceReserve final : public AdmissionPolicy {
 public:
  std::int32_t must_fit(const AdmissionCandidate& c) const override { return c.prompt_len + c.output_len - 1; }
};

}  // namespace

std::unique_ptr<AdmissionPolicy> make_chunk_admission(const SchedulerConfig&) {
  return std::make_unique<ChunkReserve>();
}
std::unique_ptr<AdmissionPolicy> make_prompt_admission(const SchedulerConfig&) {
  return std::make_unique<PromptReserve>();
}
std::unique_ptr<AdmissionPolicy> make_sequence_admission(const SchedulerConfig&) {
  return std::make_unique<SequenceReserve>();
}

}  // namespace twin
