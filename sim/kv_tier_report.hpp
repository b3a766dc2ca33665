#pragma once
// summary.json's "kv_tiers" (docs/simulate.md, "KV tiers"): per tier, HBM
// first, the prefix tokens it served and the bytes moved into and out of
// it, from every replica's KV cache after a run.
#include "metrics/summary.hpp"
#include "sim/cluster.hpp"
#include "sim/simulator.hpp"

namespace twin {

// Fills summary's kv_tier fields when some group has tiers; else leaves them
// empty (the summary is then as without tiers).
void summarize_kv_tiers(Summary& summary, const Cluster& cluster, const Simulator& simulator);

}  // namespace twin
