#include "sim/kv_tier_report.hpp"

#include <vector>

#include "metrics/kv_tier_tally.hpp"

namespace twin {

void summarize_kv_tiers(Summary& summary, const Cluster& cluster, const Simulator& simulator) {
  KvTierTally tally;
  bool overlap = false;
  for (const GroupPlan& g : cluster.groups) {
    if (!g.tiers) continue;
    overlap = overlap || g.tiers->load_overlap();
    for (std::int32_t r = g.first_replica; r < g.first_replica + g.config.count; ++r) {
      const KvCache& kv = simulator.replica(r).kv_cache();
      std::vector<KvTierStats> stats;
      std::vector<KvTierConfig> configs;
      for (std::size_t t = 0; t < kv.tiers().size(); ++t) {
        stats.push_back(kv.tiers().stats(t));
        configs.push_back(kv.tiers().config(t));
      }
      tally.add(kv.stats(), stats, configs, kv.num_blocks(), g.replica.kv.block_size, g.tiers->block_bytes());
    }
  }
  tally.finish(summary, to_seconds(simulator.tier_load_stall()), overlap);
}

}  // namespace twin
