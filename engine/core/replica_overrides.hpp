#pragma once
// Changes to a preset's knobs, typed: what the command line's named flags
// and the planner's candidates set. They are written to the fields directly;
// text is parsed only for the KEY=VALUE `options` (--set), which apply after
// the named fields, in order, so a --set has the last word.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/replica.hpp"

namespace twin {

// Scheduler / KV keys as set_replica_option takes them, in the order given.
using OptionList = std::vector<std::pair<std::string, std::string>>;

struct ReplicaOverrides {
  std::optional<std::int32_t> max_model_len;  // the scheduler's and the KV cache's
  std::optional<std::int32_t> max_num_batched_tokens;  // 0 = auto
  std::optional<std::int32_t> max_num_seqs;
  std::optional<std::int32_t> block_size;
  std::optional<std::int32_t> max_queued_requests;
  std::optional<double> max_queue_time_ms;
  std::optional<bool> enable_prefix_caching;
  std::optional<bool> enable_chunked_prefill;
  std::optional<bool> stop_at_eos;
  std::optional<std::string> order;        // vLLM's --scheduling-policy sets both: priority
  std::optional<std::string> victim;   // orders the queue and picks preemption victims
  std::optional<std::int32_t> num_gpu_blocks;
  OptionList options;  // --set KEY=VALUE, applied last

  bool empty() const;
};

// Writes each given field, then each option through set_replica_option
// (which throws UsageError naming a bad key or value). Ranges and
// contradictions are validate(ReplicaConfig)'s to check once all is applied.
void apply_overrides(ReplicaConfig& config, const ReplicaOverrides& overrides);

// The same changes as KEY=VALUE text, in the order apply_overrides makes
// them: for echoing a configuration in the config file's own form.
OptionList override_options(const ReplicaOverrides& overrides);

}  // namespace twin
