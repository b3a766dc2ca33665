#include "sim/data_parallel.hpp"

#include <string>

#include "base/error.hpp"
#include "models/model_desc.hpp"

namespace twin {

namespace {

std::string dp_flag(const ReplicaGroupConfig& g) {
  return "--data-parallel-size " + std::to_string(g.dp) + " (group key dp)";
}

// One group's flags against each other and its model.
void check_group(const ReplicaGroupConfig& g) {
  if (g.enable_expert_parallel) {
    if (!resolve_model(g.model).is_moe()) {
      throw UsageError("--enable-expert-parallel (group key enable_expert_parallel): model " + g.model +
                       " is not a mixture-of-experts model");
    }
    if (g.ep > 1) {
      throw UsageError("--enable-expert-parallel with --ep " + std::to_string(g.ep) +
                       ": give one; --ep N is twinserve's single-scheduler form of vLLM's --data-parallel-size N "
                       "--enable-expert-parallel (docs/simulate.md, \"Data parallelism\")");
    }
    if (g.dp > 1) {
      if (g.pp > 1) throw UsageError(dp_flag(g) + " with --enable-expert-parallel and --pp: lockstep ranks are modelled at pp=1");
      if (g.speculative) throw UsageError(dp_flag(g) + " with --enable-expert-parallel and speculative_config: not modelled");
      if (!g.replay.empty() || !g.profile.empty()) {
        throw UsageError(dp_flag(g) + " with --enable-expert-parallel: expert parallelism is priced by the roofline "
                         "only (drop --profile / --replay)");
      }
    }
    if (g.dp == 1 && g.tp > 1) {
      throw UsageError("--enable-expert-parallel with --tensor-parallel-size " + std::to_string(g.tp) +
                       " and no data parallelism: experts split over the TP ranks are not modelled (without the "
                       "flag the experts are TP-sharded)");
    }
  }
  if (g.dp > 1 && g.ep > 1) {
    throw UsageError(dp_flag(g) + " with --ep " + std::to_string(g.ep) +
                     ": --ep already models DP attention ranks with expert parallelism; give one");
  }
}

bool has_dp(const ClusterConfig& config) {
  for (const ReplicaGroupConfig& g : config.groups) {
    if (g.dp > 1) return true;
  }
  return false;
}

}  // namespace

std::string data_parallel_router(const ClusterConfig& config) {
  for (const ReplicaGroupConfig& g : config.groups) check_group(g);
  if (!has_dp(config)) return config.router;
  const ReplicaGroupConfig& g = config.groups.front();
  // One vLLM instance: a cluster of several (a router over instances, each
  // with its own coordinator) is two-level routing, not modelled.
  if (config.groups.size() != 1 || g.count != 1) {
    throw UsageError(dp_flag(g) + " needs a single-group cluster of one instance (count 1, no --replicas): a "
                     "router over several DP instances, each with its own coordinator, is not modelled");
  }
  if (g.role != "mixed") {
    throw UsageError(dp_flag(g) + " with role " + g.role + ": data-parallel prefill or decode pools are not modelled");
  }
  if (is_lockstep(g) && config.router_refresh_s > 0) {
    throw UsageError(dp_flag(g) + " with --enable-expert-parallel and --router-refresh-s: lockstep ranks never "
                     "advance apart, so they need a router refresh period of 0");
  }
  if (config.router_given && config.router != "dp_balance") {
    throw UsageError("--router " + config.router + " (key router) with " + dp_flag(g) +
                     ": vLLM's DP coordinator sends each request to the rank with the lowest waiting x 4 + running "
                     "(router dp_balance); leave --router unset or give dp_balance");
  }
  return "dp_balance";
}

std::vector<ReplicaGroupConfig> expand_data_parallel(const ClusterConfig& config) {
  (void)data_parallel_router(config);
  std::vector<ReplicaGroupConfig> groups = config.groups;
  if (groups.empty()) groups.emplace_back();
  for (ReplicaGroupConfig& g : groups) {
    if (is_lockstep(g)) g.ep = g.dp;
    g.count *= g.dp;
  }
  return groups;
}

bool is_lockstep(const ReplicaGroupConfig& group) { return group.dp > 1 && group.enable_expert_parallel; }

}  // namespace twin
