#pragma once
// One token-budget scheduling algorithm, configured. Each published system is
// a preset of these knobs (see scheduler.md beside this file).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/types.hpp"

namespace twin {

// Batch formation, queue order, admission reserve and preemption victim are
// plug-in policies named by the fields below (policy.hpp; the registered
// names are in policy_list.hpp, docs/policies.md says how to add one).
enum class PreemptionMode { recompute, swap };

// The largest count any knob takes (tokens, requests, blocks): far beyond a
// real replica, and small enough that sums of a few never overflow int32.
inline constexpr std::int32_t kMaxKnobCount = 1 << 30;

struct SchedulerConfig {
  std::string preset = "vllm";
  // Token budget per step; 0 = unset, as vLLM's None: chunked_budget with
  // chunked prefill, max(max_model_len, 2048) without (vLLM's SchedulerConfig
  // rule, so any admissible prompt fits one step).
  std::int32_t max_num_batched_tokens = 0;
  // The unset budget with chunked prefill: the preset's (vLLM's 8192 for the
  // OpenAI server on large GPUs). Kept apart from max_num_batched_tokens so
  // that --no-enable-chunked-prefill alone falls back to vLLM's rule.
  std::int32_t chunked_budget = 8192;
  std::int32_t max_num_seqs = 256;             // running requests at most
  std::int32_t max_model_len = 131072;         // prompt + output at most
  bool enable_chunked_prefill = true;
  std::int32_t long_prefill_token_threshold = 0;  // cap on one request's chunk, 0 = none
  bool decode_first = true;    // running first, stall-free mixing; false: a step with prefills carries no decodes
  std::string batching = "continuous";  // a BatchPolicy: continuous, static, dynamic
  std::int32_t batch_size = 8;          // static / dynamic: requests per batch
  Time batch_timeout = 50 * kNsPerMs;   // dynamic: wait at most this long
  std::string order = "fcfs";  // a QueueOrderPolicy
  std::vector<std::int32_t> length_bucket_bounds{256, 1024, 4096};  // upper bounds
  PreemptionMode preemption = PreemptionMode::recompute;
  std::string victim = "newest";  // a VictimPolicy
  bool stop_at_eos = false;  // honour StepResult::stopped (engine with EOS)
  // Overload control (scheduler.md, "Overload control"); 0 = off, the default.
  // An arrival finding this many requests waiting is rejected ("queue full");
  // SGLang's --max-queued-requests.
  std::int32_t max_queued_requests = 0;
  // A request still waiting, never scheduled, this long after it was added is
  // rejected ("queue timeout").
  Time max_queue_time = 0;
  // Speculative decoding (scheduler.md, "Speculative decoding"): k lookahead
  // tokens scheduled after each running decode, verified in the same step;
  // 0 = off, the default. vLLM's speculative_config.num_speculative_tokens.
  std::int32_t num_speculative_tokens = 0;
  // vLLM's async_scheduling (on by default in vLLM >= 0.11 where supported):
  // the engine plans step N+1 while step N runs, so a request that arrives
  // during step N is first admitted in step N+2. Modelled as an admission
  // horizon: a plan made as the previous step completes admits only requests
  // added by that step's start (scheduler.md, "Async scheduling").
  bool async_scheduling = false;
  // What the free KV blocks must be able to hold for a waiting request to be
  // admitted: only the tokens scheduled now (chunk); its whole prompt, with
  // the outputs so far when resumed (prompt: vLLM 0.19's
  // scheduler_reserve_full_isl); or prompt + every output token it may
  // produce (sequence: TensorRT-LLM's GUARANTEED_NO_EVICT capacity policy,
  // which never preempts).
  std::string admission_reserve = "chunk";  // an AdmissionPolicy
};

// The named presets: vllm, vllm-v0, sarathi, orca, static, dynamic, lightllm,
// sglang, trtllm (docs/engines.md says what each does and where it comes from).
std::vector<std::string> scheduler_preset_names();
// Throws UsageError listing the known names for an unknown one.
SchedulerConfig scheduler_preset(std::string_view name);
// Sets one knob by its key (the field name above, e.g. "max_num_seqs",
// "order" = "fcfs"); throws UsageError naming the key or the bad value.
void set_scheduler_option(SchedulerConfig& config, std::string_view key, std::string_view value);
// Throws UsageError when knobs contradict each other or are out of range.
void validate(const SchedulerConfig& config);
// The budget in force: max_num_batched_tokens, or its unset value as above.
std::int32_t effective_token_budget(const SchedulerConfig& config);
std::vector<std::string> scheduler_option_keys();
}  // namespace twin
