#pragma once
// vLLM's data parallelism (--data-parallel-size N): N engine cores, each
// with its own scheduler, limits (max_num_seqs, max_num_batched_tokens) and
// KV cache, behind vLLM's DP coordinator, which sends each arrival to the
// rank with the lowest waiting x 4 + running (router dp_balance). For a
// dense model (or an MoE model without --enable-expert-parallel) the ranks
// never wait for each other, so a DP instance is N replicas under that
// router. An MoE model's ranks under --enable-expert-parallel step in
// lockstep instead (is_lockstep). docs/simulate.md, "Data parallelism".
#include <vector>

#include "sim/cluster_config.hpp"

namespace twin {

// The router a config runs under: dp_balance when a group has dp > 1 (a
// router given explicitly must be that one), else the config's. UsageError
// naming the flags and keys for a combination it cannot run.
std::string data_parallel_router(const ClusterConfig& config);

// The config's groups (one default group when it has none) with every DP
// rank a replica (count x dp); checks the combinations as
// data_parallel_router does.
// A lockstep group (MoE, --enable-expert-parallel, dp > 1) also gets ep = dp:
// its experts split over the ranks as --ep's.
std::vector<ReplicaGroupConfig> expand_data_parallel(const ClusterConfig& config);

// vLLM's MoE DP ranks under expert parallelism: they start every step
// together, each planning its own batch (a rank without work runs a dummy
// one), and the step lasts what the slowest rank's does, its experts routed
// every rank's tokens (ServingOptions::lockstep, VirtualClock::run_lockstep).
bool is_lockstep(const ReplicaGroupConfig& group);

}  // namespace twin
