#pragma once
// The cluster a simulation runs: replica groups (model, hardware, dtype, TP,
// PP, count), the scheduler preset and overrides, the router, SLOs and seed.
// Read from JSON where every key is checked (docs/simulate.md); command-line
// flags then override the common knobs.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/replica_overrides.hpp"
#include "models/speculative_config.hpp"

namespace twin {

struct ReplicaGroupConfig {
  std::string model = "llama-3.1-8b";
  std::string hardware = "h100-80gb";
  std::string dtype;     // weights; empty: the model's published dtype
  std::string kv_dtype;  // empty: the weight dtype (fp32 weights: fp32)
  // vLLM's --quantization: fp8, awq, gptq, int8_w8a8, int8; empty: none
  // (models/quantization.hpp, docs/quantization.md).
  std::string quantization;
  std::int32_t tp = 1;
  std::int32_t pp = 1;
  // Expert parallelism (MoE models): ep ranks of tp GPUs per stage, attention
  // data parallel, experts split over the ranks; the busiest rank's share of
  // the routed tokens (0: uniform). models/model_math.hpp, docs/simulate.md.
  std::int32_t ep = 1;
  double expert_busiest_share = 0;
  // vLLM's --data-parallel-size: dp ranks, each its own scheduler and KV
  // cache behind vLLM's DP coordinator (sim/data_parallel.hpp); and
  // --enable-expert-parallel (MoE experts over the DP x TP ranks).
  std::int32_t dp = 1;
  bool enable_expert_parallel = false;
  std::int32_t count = 1;
  double gpu_memory_utilization = 0;       // 0: the cluster's
  std::int32_t num_gpu_blocks_override = -1;  // -1: the cluster's; 0: none
  OptionList scheduler_options;            // applied after the cluster's
  // Cost model: empty = roofline from the hardware profile. `replay` is an
  // engine run's steps.csv: every step lasts what it measured (the replay
  // parity check; pp must be 1).
  std::string replay;
  // `profile` is a calibrated profile (`twinserve calibrate`): the calibrated
  // cost model; the group's dtypes default to the profile's.
  std::string profile;
  // Speculative decoding (docs/speculative.md): `speculative_config` in a
  // group, or --speculative-config for every group.
  std::optional<SpeculativeConfig> speculative;
  // Its pool under prefill/decode disaggregation: "mixed" (default, no
  // pools), "prefill" or "decode" (engine/core/disaggregation.hpp).
  std::string role = "mixed";
};

// How a cluster with prefill and decode groups disaggregates
// (docs/disaggregation.md). Unused without such groups.
struct DisaggregationConfig {
  std::string mode = "always";             // never, always, conditional
  std::int32_t conditional_threshold = 0;  // tokens not cached on the decode side above which to disaggregate
  std::string kv_transfer = "whole";       // whole, layerwise
  std::string prefill_router;              // empty: the cluster's router
  std::string decode_router;               // empty: the cluster's router
  // An engine run's requests.csv: each transfer lasts what the engine
  // measured for it (replay parity with the groups' `replay` step logs).
  std::string replay;
};

// One tier below HBM for evicted prefix blocks (engine/core/kv_tiers.hpp),
// per replica: its host's DRAM, its local SSD (docs/simulate.md, "KV tiers").
// A capacity in GiB or in blocks (exactly one); bandwidths in GB/s (1e9
// bytes/s) and latency per transfer; 0 / -1: the default for the name
// (dram: the hardware profile's host link; ssd: a PCIe 4 NVMe drive), which
// other names do not have.
struct KvTierSpec {
  std::string name;
  double capacity_gib = 0;
  std::int64_t capacity_blocks = 0;
  double read_gbps = 0;   // tier -> HBM
  double write_gbps = 0;  // into the tier
  double latency_us = -1;
};

struct ClusterConfig {
  std::vector<ReplicaGroupConfig> groups;  // empty: one default group
  std::string scheduler_preset = "vllm";
  OptionList scheduler_options;            // the file's, applied first
  ReplicaOverrides overrides;              // flags and planner candidates: then these, then a group's options
  // vLLM's --max-model-len auto (or -1): each group's max_model_len is the
  // largest its KV cache holds one request of, at most the model's context
  // (engine/core/kv_fit.hpp). Its scheduler key: "max_model_len": "auto".
  bool max_model_len_auto = false;
  std::string router = "round_robin";
  bool router_given = false;  // set by the file or a flag (not the default)
  // How often the router's view of the replicas is refreshed, in seconds
  // (docs/simulate.md, "Router refresh"): 0 (default) routes on every
  // replica's state at the arrival, exactly; > 0 on what the router saw at
  // the last refresh, and the replicas advance apart in between (threads,
  // MPI ranks). At most kMaxRouterRefreshS.
  double router_refresh_s = 0;
  DisaggregationConfig disaggregation;
  std::string slos;                        // "ttft_p90<=2s,..."; empty: none
  std::uint64_t seed = 0;
  double gpu_memory_utilization = 0.9;
  std::int32_t num_gpu_blocks_override = 0;  // 0: from memory
  // Tiers below HBM, nearest first (empty: none), and whether a step's
  // loads from them overlap its compute (else they delay it).
  std::vector<KvTierSpec> kv_tiers;
  bool kv_tier_load_overlap = false;
  // The file the config was read from (not echoed): errors found while the
  // cluster is built (a group that does not fit, a layout that does not
  // divide the heads) name it and the group. Empty for a config from flags.
  std::string origin;
};

// Replica groups a cluster config may list: a group is a kind of replica
// (model, hardware, layout, role), and `count` gives the replicas of a kind,
// so real clusters need a handful; the cap keeps one file from costing
// minutes and gigabytes before the first request.
inline constexpr std::size_t kMaxReplicaGroups = 1024;

// The router refresh period's range: 0, or from a microsecond to a day.
inline constexpr double kMinRouterRefreshS = 1e-6;
inline constexpr double kMaxRouterRefreshS = 86400;
// twin::UsageError unless `seconds` is in that range; `what` (if given) names the key or flag.
void check_router_refresh(double seconds, const std::string& what);

// Throws twin::Error naming `origin` and the key for an unknown key, a wrong
// type or an out-of-range value.
ClusterConfig parse_cluster_config(const nlohmann::json& json, const std::string& origin);
// Reads and parses a file; a missing file or bad JSON is an Error naming it.
ClusterConfig load_cluster_config(const std::string& path);
// The config as JSON in the input format (for the summary's config echo).
nlohmann::ordered_json cluster_config_json(const ClusterConfig& config);
// vLLM's spellings of an automatic max_model_len: "auto" or "-1".
bool is_auto_max_model_len(const std::string& text);
// True when some group has the prefill or decode role.
bool has_pools(const ClusterConfig& config);

}  // namespace twin
