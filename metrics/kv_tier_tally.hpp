#pragma once
// summary.json's "kv_tiers" (docs/outputs.md), added up over replicas: per
// tier, HBM first, the prefix tokens it served and the bytes moved into and
// out of it, from each replica's KV cache books after a run. The simulator
// (sim/kv_tier_report) and the engine's `run` both fill it here.
#include <cstdint>
#include <span>
#include <vector>

#include "engine/core/kv_cache.hpp"
#include "engine/core/kv_tiers.hpp"
#include "metrics/summary.hpp"

namespace twin {

class KvTierTally {
 public:
  // One replica: its cache's counters, its tiers' counters and configs (the
  // same list, by position, for every replica), its device blocks, tokens
  // per block, and bytes per block (all its GPUs together).
  void add(const KvCacheStats& kv, std::span<const KvTierStats> tiers, std::span<const KvTierConfig> configs,
           std::int64_t hbm_blocks, std::int32_t block_tokens, double block_bytes);
  // One replica, read from its KV cache's own books (counters, tiers, blocks).
  void add(const KvCache& kv, std::int32_t block_tokens, double block_bytes);
  // Writes the summary's kv_tier fields; nothing when no replica had tiers.
  void finish(Summary& summary, double load_stall_s, bool load_overlap) const;

 private:
  std::vector<KvTierSummary> rows_;
  std::uint64_t lookup_tokens_ = 0;
};

}  // namespace twin
