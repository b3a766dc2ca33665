#pragma once
// The prefill/decode disaggregation flags (docs/disaggregation.md), one
// spelling and one parser for `simulate` (simulated pools) and `run` (a
// prefill and a decode replica in the engine's process).
#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "sim/cluster_config.hpp"

namespace twin::cli {

struct DisaggFlags {
  std::optional<std::int32_t> prefill_replicas, decode_replicas, disagg_threshold;
  std::optional<std::string> disagg_mode, kv_transfer, prefill_router, decode_router;
};

void add_disagg_flags(CLI::App& app, DisaggFlags& flags);

// Splits the config's single group into a prefill and a decode group of
// the flags' sizes and sets its disaggregation keys. UsageError naming the
// flag: one size without the other, with `replicas_given` (--replicas), on
// a cluster of several groups, or a pool flag without pools.
void apply_disagg_flags(const DisaggFlags& flags, ClusterConfig& config, bool replicas_given);

}  // namespace twin::cli
