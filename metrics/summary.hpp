#pragma once
// The numbers of one run, as the collector computes them and summary.json /
// the summary table show them. Plain data. docs/outputs.md defines each.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics/energy.hpp"
#include "metrics/slo.hpp"

namespace twin {

// Latency distribution in milliseconds. All NaN (null in JSON) when count is 0.
struct LatencyStats {
  std::uint64_t count = 0;
  double mean = 0, std = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;  // std: population (numpy's, as vLLM's benchmark)
};

struct SloResult {
  Slo slo;
  double measured_ms = 0;   // the metric at slo.percentile; NaN if no percentile or no data
  bool percentile_met = false;  // measured_ms <= threshold (false without a percentile)
  // Share of all requests (rejected and aborted ones fail) whose own value
  // meets this SLO's threshold.
  double request_fraction_met = 0;
};

struct Spread {  // over replicas
  double min = 0, max = 0, mean = 0;
  double cv = 0;  // population standard deviation / mean; 0 when the mean is 0
};

struct ReplicaLoad {
  std::int32_t replica = 0;
  std::uint64_t requests = 0;  // records routed to it, whatever their outcome
  std::uint64_t tokens = 0;    // prompt + output tokens of those records, rejected ones excepted
};

// KV transfers of a disaggregated run (docs/disaggregation.md), over every
// record whatever its outcome.
struct TransferSummary {
  std::uint64_t handed_off = 0;   // records prefilled on another replica than the one that ended them
  std::uint64_t transfers = 0;    // of them, whose KV reached the decode replica
  std::uint64_t bytes = 0;        // KV bytes moved
  double transfer_s = 0;          // sum of the transfers' times (blocks reserved to KV there)
  LatencyStats wait_ms;           // prefill end to blocks reserved on the decode side
  LatencyStats transfer_ms;       // blocks reserved to KV there (includes queueing for the link)
};

// One tier of a run with KV tiers below HBM (docs/simulate.md, "KV tiers"),
// over every replica; the first row is HBM itself. Counted at every
// allocation that looked up a prefix (a recomputed request again).
struct KvTierSummary {
  std::string name;                  // hbm, dram, ssd, ...
  std::int64_t capacity_blocks = 0;  // all replicas together
  std::uint64_t hit_tokens = 0;      // prompt tokens served from this tier
  double hit_rate = 0;               // hit_tokens / lookup_tokens
  std::uint64_t loaded_bytes = 0;    // read from this tier into HBM
  std::uint64_t stored_bytes = 0;    // written into it (HBM evictions, demotions from above)
  std::uint64_t demoted_blocks = 0;  // pushed to the next tier, or dropped from the last
};

struct Summary {
  std::uint64_t num_requests = 0, completed = 0, rejected = 0, aborted = 0;
  LatencyStats ttft_ms, tpot_ms, itl_ms, e2el_ms;
  // TTFT, TPOT and E2EL (and the KV transfer times) from histograms, not
  // every value (metrics/collector.hpp): summary.json says so.
  bool percentiles_streamed = false;

  double duration_s = 0;  // first arrival to last finish
  double offered_rate = 0;  // requests / arrival span (req/s); 0 for a burst (one arrival time)
  std::uint64_t total_input_tokens = 0, total_output_tokens = 0;  // completed requests
  double request_throughput = 0, input_throughput = 0, output_throughput = 0,
         total_token_throughput = 0;
  // vLLM bench serve's peaks (metrics/peak_tally.hpp): the most output
  // tokens in one second and the most completed requests active in one.
  std::uint64_t max_output_tokens_per_s = 0, max_concurrent_requests = 0;

  std::vector<SloResult> slos;
  std::uint64_t good_requests = 0;  // completed and within every SLO threshold
  double goodput = 0;               // good_requests / duration_s

  double prefix_cache_hit_rate = 0;
  std::uint64_t preemptions = 0;
  bool disaggregated = false;  // kv_transfer below is written
  TransferSummary kv_transfer;
  // KV tiers below HBM: written only when the run has some (non-empty).
  std::vector<KvTierSummary> kv_tiers;
  std::uint64_t kv_tier_lookup_tokens = 0;  // prompt tokens of the allocations that looked up a prefix
  double kv_tier_hit_rate = 0;              // all tiers' hit tokens (HBM too) / lookup tokens
  std::uint64_t kv_tier_bytes_moved = 0;    // loaded + stored bytes, all tiers
  double kv_tier_load_stall_s = 0;          // step time spent waiting for loads (not hidden by compute)
  bool kv_tier_load_overlap = false;

  std::vector<ReplicaLoad> replicas;  // ascending replica id
  Spread replica_requests, replica_tokens;

  std::uint64_t num_steps = 0;
  double mean_kv_blocks_used = 0, max_kv_blocks_used = 0;
  double mean_batch_size = 0, max_batch_size = 0;
  std::int64_t kv_blocks_capacity = 0;  // per replica, from the caller; 0: unknown

  // Speculative decoding (summary.json "speculative", only when any step
  // verified proposals): per verification = one seq's lookahead in one step.
  std::uint64_t spec_proposed_tokens = 0, spec_accepted_tokens = 0, spec_verifications = 0;
  double spec_acceptance_rate = 0;        // accepted / proposed
  double spec_mean_accepted_tokens = 0;   // accepted / verifications
  double spec_tokens_per_verification = 0;  // 1 + the above: tokens a verifying seq gains per target step

  EnergySummary energy;  // issue 44: "energy" in summary.json
  std::optional<MeasuredEnergy> measured_energy;  // engine runs: "measured_energy" in summary.json

  double simulated_time_s = 0, wall_time_s = 0;  // filled by the caller
  // What a reader should know before trusting the figures (e.g. the load
  // outgrew the cluster: metrics/backlog.hpp); empty for a healthy run.
  std::vector<std::string> warnings;
  // The overload warning is among them: the queue grew all along
  // (metrics/backlog.hpp). Sweep rows and plan probes carry the flag.
  bool overloaded = false;
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
};

// What the caller knows that records do not carry.
struct SummaryContext {
  std::vector<Slo> slos;
  std::int32_t num_replicas = 0;  // replicas 0..n-1 appear in the spread even if idle; 0: those seen
  std::int64_t kv_blocks_capacity = 0;
  bool disaggregated = false;  // prefill/decode pools: summarise the KV transfers
  double simulated_time_s = 0;
  double wall_time_s = 0;
  EnergyContext energy;  // the cluster's power (default: energy not known)
  std::optional<MeasuredEnergy> measured_energy;  // an engine run's counter reading (engine/runtime/energy_meter.hpp)
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
};

}  // namespace twin
