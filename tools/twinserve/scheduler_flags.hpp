#pragma once
// The scheduler flags `simulate` and `run` share, with vLLM's names, and the
// KEY=VALUE overrides they stand for (the keys of set_replica_option).
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace CLI {
class App;
}

namespace twin::cli {

struct SchedulerFlags {
  std::optional<std::string> preset;
  std::optional<std::int32_t> max_num_batched_tokens, max_num_seqs, block_size, max_queued_requests;
  std::optional<double> max_queue_time_ms;
  bool prefix_on = false, prefix_off = false, chunked_on = false, chunked_off = false;
  std::vector<std::string> set_options;  // --set KEY=VALUE
};

void add_scheduler_flags(CLI::App& sub, SchedulerFlags& flags);

// The overrides in the order they apply: the named flags, then each --set.
// Throws UsageError for contradicting flags or a --set without '='.
std::vector<std::pair<std::string, std::string>> scheduler_overrides(const SchedulerFlags& flags);

}  // namespace twin::cli
