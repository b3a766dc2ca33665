#include "metrics/kv_tier_tally.hpp"

#include <algorithm>
#include <cmath>

namespace twin {

void KvTierTally::add(const KvCacheStats& kv, std::span<const KvTierStats> tiers, std::span<const KvTierConfig> configs,
                      std::int64_t hbm_blocks, std::int32_t block_tokens, double block_bytes) {
  if (configs.empty()) return;
  const auto tokens = static_cast<std::uint64_t>(block_tokens);
  auto bytes = [&](std::int64_t blocks) {
    return static_cast<std::uint64_t>(std::llround(block_bytes * static_cast<double>(std::max<std::int64_t>(0, blocks))));
  };
  if (rows_.empty()) rows_.push_back(KvTierSummary{"hbm"});
  lookup_tokens_ += static_cast<std::uint64_t>(kv.lookup_tokens);
  rows_[0].capacity_blocks += hbm_blocks;
  rows_[0].hit_tokens += static_cast<std::uint64_t>(kv.hit_blocks - kv.tier_hit_blocks) * tokens;
  for (std::size_t t = 0; t < configs.size() && t < tiers.size(); ++t) {
    if (rows_.size() <= t + 1) rows_.push_back(KvTierSummary{configs[t].name});
    KvTierSummary& row = rows_[t + 1];
    const KvTierStats& ts = tiers[t];
    row.capacity_blocks += configs[t].capacity_blocks;
    row.hit_tokens += static_cast<std::uint64_t>(ts.hit_blocks) * tokens;
    row.loaded_bytes += bytes(ts.hit_blocks);
    row.stored_bytes += bytes(ts.stored_blocks);
    row.demoted_blocks += static_cast<std::uint64_t>(ts.demoted_blocks);
  }
}

void KvTierTally::add(const KvCache& kv, std::int32_t block_tokens, double block_bytes) {
  std::vector<KvTierStats> stats;
  std::vector<KvTierConfig> configs;
  for (std::size_t t = 0; t < kv.tiers().size(); ++t) {
    stats.push_back(kv.tiers().stats(t));
    configs.push_back(kv.tiers().config(t));
  }
  add(kv.stats(), stats, configs, kv.num_blocks(), block_tokens, block_bytes);
}

void KvTierTally::finish(Summary& summary, double load_stall_s, bool load_overlap) const {
  if (rows_.empty()) return;
  std::vector<KvTierSummary> rows = rows_;
  std::uint64_t hit = 0, moved = 0;
  for (KvTierSummary& row : rows) {
    row.hit_rate = lookup_tokens_ > 0 ? static_cast<double>(row.hit_tokens) / static_cast<double>(lookup_tokens_) : 0.0;
    hit += row.hit_tokens;
    moved += row.loaded_bytes + row.stored_bytes;
  }
  summary.kv_tiers = std::move(rows);
  summary.kv_tier_lookup_tokens = lookup_tokens_;
  summary.kv_tier_hit_rate = lookup_tokens_ > 0 ? static_cast<double>(hit) / static_cast<double>(lookup_tokens_) : 0.0;
  summary.kv_tier_bytes_moved = moved;
  summary.kv_tier_load_stall_s = load_stall_s;
  summary.kv_tier_load_overlap = load_overlap;
}

}  // namespace twin
