#include "sim/kv_tier_report.hpp"

#include <algorithm>
#include <cmath>

namespace twin {

void summarize_kv_tiers(Summary& summary, const Cluster& cluster, const Simulator& simulator) {
  std::vector<KvTierSummary> rows;
  std::uint64_t lookup_tokens = 0;
  bool any = false;
  bool overlap = false;
  for (const GroupPlan& g : cluster.groups) {
    if (!g.tiers) continue;
    any = true;
    overlap = overlap || g.tiers->load_overlap();
    const std::vector<KvTierLink>& links = g.tiers->tiers();
    if (rows.empty()) rows.push_back(KvTierSummary{"hbm"});
    const auto block_tokens = static_cast<std::uint64_t>(g.replica.kv.block_size);
    const double block_bytes = g.tiers->block_bytes();
    auto bytes = [&](std::int64_t blocks) {
      return static_cast<std::uint64_t>(std::llround(block_bytes * static_cast<double>(std::max<std::int64_t>(0, blocks))));
    };
    for (std::int32_t r = g.first_replica; r < g.first_replica + g.config.count; ++r) {
      const KvCache& kv = simulator.replica(r).kv_cache();
      const KvCacheStats& st = kv.stats();
      lookup_tokens += static_cast<std::uint64_t>(st.lookup_tokens);
      rows[0].capacity_blocks += kv.num_blocks();
      rows[0].hit_tokens += static_cast<std::uint64_t>(st.hit_blocks - st.tier_hit_blocks) * block_tokens;
      for (std::size_t t = 0; t < links.size(); ++t) {
        // Groups list the same tiers (the cluster's), by position.
        if (rows.size() <= t + 1) rows.push_back(KvTierSummary{links[t].name});
        KvTierSummary& row = rows[t + 1];
        const KvTierStats& ts = kv.tiers().stats(t);
        row.capacity_blocks += links[t].capacity_blocks;
        row.hit_tokens += static_cast<std::uint64_t>(ts.hit_blocks) * block_tokens;
        row.loaded_bytes += bytes(ts.hit_blocks);
        row.stored_bytes += bytes(ts.stored_blocks);
        row.demoted_blocks += static_cast<std::uint64_t>(ts.demoted_blocks);
      }
    }
  }
  if (!any) return;
  std::uint64_t hit = 0, moved = 0;
  for (KvTierSummary& row : rows) {
    row.hit_rate = lookup_tokens > 0 ? static_cast<double>(row.hit_tokens) / static_cast<double>(lookup_tokens) : 0.0;
    hit += row.hit_tokens;
    moved += row.loaded_bytes + row.stored_bytes;
  }
  summary.kv_tiers = std::move(rows);
  summary.kv_tier_lookup_tokens = lookup_tokens;
  summary.kv_tier_hit_rate = lookup_tokens > 0 ? static_cast<double>(hit) / static_cast<double>(lookup_tokens) : 0.0;
  summary.kv_tier_bytes_moved = moved;
  summary.kv_tier_load_stall_s = to_seconds(simulator.tier_load_stall());
  summary.kv_tier_load_overlap = overlap;
}

}  // namespace twin
