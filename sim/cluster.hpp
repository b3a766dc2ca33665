#pragma once
// Turns a ClusterConfig into what the simulator runs: resolves models and
// hardware, checks each layout, plans KV memory, places every replica's GPUs
// in the cluster graph, and gives each group its cost model: the roofline
// priced from that graph, a calibrated profile, or an engine run's replay.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/replica.hpp"
#include "engine/core/router.hpp"
#include "hwprofiles/hardware_desc.hpp"
#include "models/model_desc.hpp"
#include "models/model_math.hpp"
#include "sim/cluster_config.hpp"
#include "sim/kv_transfer.hpp"
#include "sim/kv_tier_model.hpp"
#include "sim/memory_plan.hpp"
#include "sim/roofline_cost_model.hpp"
#include "sim/simulator.hpp"
#include "sim/topology.hpp"

namespace twin {

struct GroupPlan {
  ReplicaGroupConfig config;
  ModelDesc model;
  HardwareDesc hardware;
  Dtype dtype = Dtype::bf16;     // activations and the unquantised weights
  Dtype kv_dtype = Dtype::bf16;
  WeightPrecision precision;     // dtype and the linear layers' quantization on this hardware
  ParallelLayout layout;
  ReplicaConfig replica;        // kv.num_blocks planned
  MemoryPlan memory;
  std::int32_t first_replica = 0;
  std::vector<std::vector<GpuId>> replica_gpus;  // per replica: stage-major, tp ranks within a stage
  std::shared_ptr<const KvTierModel> tiers;      // KV tiers below HBM; null: none
};

struct Cluster {
  ClusterTopology topology;
  std::vector<GroupPlan> groups;
  std::vector<SimReplicaSpec> replicas;
  std::string router = "round_robin";
  // Prefill/decode pools: set when some group has a pool role.
  DisaggOptions disagg;
  std::shared_ptr<KvTransferModel> transfers;  // null without pools
  // Per replica, the lockstep group of vLLM's MoE DP ranks it belongs to
  // (-1: none; empty when no replica steps in lockstep): ServingOptions::lockstep.
  std::vector<std::int32_t> lockstep;
  bool disaggregated() const { return transfers != nullptr; }
  std::int64_t total_kv_blocks() const;
  std::int32_t num_gpus() const { return topology.num_gpus(); }
};

// Activation memory the memory plan reserves on one GPU: the peak of vLLM's
// profile run at the token budget, the larger of the MLP's intermediate
// buffers over the whole budget and the sampler's fp32 logits for
// max_num_seqs sequences. (The CUDA context, workspaces and collective
// buffers are the hardware profile's reserves, apart from this.)
double activation_reserve_bytes(const ModelDesc& model, const ParallelLayout& layout, Dtype weights,
                                const SchedulerConfig& scheduler);

// The roofline inputs of one hardware profile at a weight dtype (links and
// rings are filled per replica from the graph).
NodeLinks node_links(const HardwareDesc& hw);

// The serving loop's disaggregation options from a config's keys; a pool
// without its own router takes the cluster's `router`. The simulator's
// cluster and the engine's pools (`run --prefill-replicas`) both use it.
DisaggOptions disagg_options(const DisaggregationConfig& config, const std::string& router);

// What build_cluster does with vLLM's start-up check (engine/core/kv_fit.hpp)
// when a replica's KV cache cannot hold one request of max_model_len:
// refuse (throw Error in vLLM's words, as vLLM refuses to start), or only
// report it in GroupPlan::memory.fit (--explain-memory prints the verdict).
enum class StartUpCheck { refuse, report };

// Throws UsageError for unknown names, bad layouts or options (naming them),
// Error when a model does not fit (with the numbers) or, under
// StartUpCheck::refuse, when its KV cache cannot hold max_model_len.
Cluster build_cluster(const ClusterConfig& config, StartUpCheck check = StartUpCheck::refuse);

}  // namespace twin
