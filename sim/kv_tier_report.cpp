#include "sim/kv_tier_report.hpp"

#include "metrics/kv_tier_tally.hpp"

namespace twin {

void summarize_kv_tiers(Summary& summary, const Cluster& cluster, const Simulator& simulator) {
  KvTierTally tally;
  bool overlap = false;
  for (const GroupPlan& g : cluster.groups) {
    if (!g.tiers) continue;
    overlap = overlap || g.tiers->load_overlap();
    for (std::int32_t r = g.first_replica; r < g.first_replica + g.config.count; ++r) {
      tally.add(simulator.replica(r).kv_cache(), g.replica.kv.block_size, g.tiers->block_bytes());
    }
  }
  tally.finish(summary, to_seconds(simulator.tier_load_stall()), overlap);
}

}  // namespace twin
