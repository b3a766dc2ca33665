#pragma once
// The scheduler flags `simulate`, `run` and `validate` share, with vLLM's
// names, and the typed overrides they stand for.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/replica_overrides.hpp"

namespace CLI {
class App;
}

namespace twin::cli {

struct SchedulerFlags {
  std::optional<std::string> preset, scheduling_policy, queue_order;
  std::optional<std::int32_t> max_num_batched_tokens, max_num_seqs, block_size, max_queued_requests;
  std::optional<double> max_queue_time_ms;
  bool prefix_on = false, prefix_off = false, chunked_on = false, chunked_off = false;
  bool async_on = false, async_off = false, enforce_eager = false, disable_custom_all_reduce = false;
  std::optional<std::int32_t> graph_capture_max;
  std::vector<std::string> set_options;  // --set KEY=VALUE
};

void add_scheduler_flags(CLI::App& sub, SchedulerFlags& flags);

// The named flags as typed fields, each --set as an option (applied after
// them). Throws UsageError for contradicting flags or a --set without '='.
ReplicaOverrides scheduler_overrides(const SchedulerFlags& flags);

}  // namespace twin::cli
