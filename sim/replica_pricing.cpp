#include "sim/replica_pricing.hpp"

#include <string>

#include "base/error.hpp"

namespace twin {

std::vector<VirtualClock::Pricing> pricing_of(const std::vector<SimReplicaSpec>& specs) {
  std::vector<VirtualClock::Pricing> out;
  out.reserve(specs.size());
  for (const SimReplicaSpec& spec : specs) {
    if (spec.config.scheduler.num_speculative_tokens > 0 && !spec.acceptance) {
      throw UsageError("simulator: a replica speculates (num_speculative_tokens " +
                       std::to_string(spec.config.scheduler.num_speculative_tokens) +
                       ") but has no acceptance model: give acceptance_rate, acceptance_length or acceptance_from");
    }
    if (!spec.config.kv.tiers.empty() && !spec.tiers) {
      throw UsageError("simulator: a replica has KV tiers below HBM but no model pricing their transfers");
    }
    VirtualClock::Pricing p;
    p.cost = spec.cost_model;
    p.stages = spec.pipeline_stages;
    p.acceptance = spec.acceptance;
    p.tiers = spec.tiers;
    p.power = spec.power;
    p.stage_gpus = spec.stage_gpus;
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace twin
