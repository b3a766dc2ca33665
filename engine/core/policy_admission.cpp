// The built-in admission reserves (policy_list.hpp registers them).
#include <algorithm>
#include <limits>

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

// SGLang's PrefillAdder: a request is admitted when its prompt (less its
// cached prefix) and all its outputs, each request at most 4,096, fit in the
// free and evictable KV less what the running requests are expected to
// still write: their remaining outputs (each clipped to 4,096) x
// new_token_ratio. The ratio starts at 0.7, falls by (0.7 - 0.098) / 600
// per decode step to 0.098, returns to 0.7 when the server idles, and after
// a retraction is set from the batch: (outputs made + 20 per running
// request) / (outputs in all + 1), at most 1 (schedule_policy.py,
// new_token_ratio_tracker.py, schedule_batch.py retract_decode; environ.py
// SGLANG_INIT_NEW_TOKEN_RATIO 0.7, _MIN_NEW_TOKEN_RATIO_FACTOR 0.14,
// _NEW_TOKEN_RATIO_DECAY_STEPS 600, _RETRACT_DECODE_STEPS 20,
// _CLIP_MAX_NEW_TOKENS_ESTIMATION 4096). The engine's max_new_tokens is
// taken to be the request's output length, as a benchmark client sends it.
class SglangReserve final : public AdmissionPolicy {
 public:
  std::int32_t must_fit(const AdmissionCandidate& c) const override {
    const std::int64_t own_outputs = std::min<std::int64_t>(c.output_len - (c.known_tokens - c.prompt_len), kClip);
    const auto reserve = static_cast<std::int64_t>(static_cast<double>(c.running_outputs_left) * ratio_);
    return static_cast<std::int32_t>(std::min<std::int64_t>(c.known_tokens + std::max<std::int64_t>(own_outputs, 0) + reserve,
                                                            std::numeric_limits<std::int32_t>::max()));
  }
  std::int32_t running_output_clip() const override { return kClip; }
  void observe(const AdmissionStep& s) override {
    if (s.idle) {
      ratio_ = kInit;
    } else if (s.preempted) {
      const double done = static_cast<double>(s.running_outputs_done + kRetractSteps * s.running);
      ratio_ = std::min(1.0, done / static_cast<double>(s.running_outputs_total + 1));
    } else if (s.decoded) {
      ratio_ = std::max(ratio_ - (kInit - kMin) / kDecaySteps, kMin);
    }
  }

 private:
  static constexpr std::int32_t kClip = 4096;
  static constexpr double kInit = 0.7;
  static constexpr double kMin = 0.7 * 0.14;
  static constexpr double kDecaySteps = 600;
  static constexpr std::int64_t kRetractSteps = 20;
  double ratio_ = kInit;
};

}  // namespace

std::unique_ptr<AdmissionPolicy> make_sglang_admission(const SchedulerConfig&) {
  return std::make_unique<SglangReserve>();
}

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
