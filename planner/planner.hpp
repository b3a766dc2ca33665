#pragma once
// `twinserve plan`: for every candidate replica configuration, its capacity
// (capacity.hpp), the replicas the planned rate needs (the trace's, or
// --target-rate's: verified by simulating the whole cluster with its router
// on the trace replayed at that rate), the cost; then the ranking,
// the chosen configuration and the Pareto front of cost against latency.
#include <functional>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/capacity.hpp"
#include "planner/loaded_trace.hpp"
#include "planner/search_space.hpp"
#include "planner/thread_pool.hpp"

namespace twin {

struct PlanOptions {
  SearchSpace space;
  std::string slos;              // required: at least one SLO
  CapacityOptions capacity;      // start_rate is set from the trace
  std::size_t verify_requests = 0;  // requests of the cluster check (0: the whole trace)
  std::int32_t max_extra_replicas = 8;  // added one by one when the cluster check fails
  // The mean arrival rate to size for (req/s; --target-rate, e.g. next
  // year's traffic); 0: the trace's own. The trace is replayed rescaled to it
  // (ScaledTraceSource, the one rule of engine/core/timeline.hpp).
  double target_rate = 0;
  // $/kWh (--energy-price; issue 44): a candidate's cost per hour adds the
  // electricity its cluster check drew, so the ranking weighs energy too.
  // 0: the GPUs' price only.
  double energy_price_per_kwh = 0;
  std::uint64_t seed = 0;
  int jobs = 0;  // threads; 0: hardware threads
  ProgressFn progress;  // (candidates evaluated, candidates) after each one
  // Asked before each candidate starts (from any thread): true leaves the
  // rest unevaluated (plan's Ctrl-C; those running finish), and
  // evaluate_some returns the candidates evaluated only.
  std::function<bool()> stop;
};

enum class CandidateStatus { ok, pruned, slo_unmet, verify_failed, over_max_gpus, over_budget, over_power_budget };
std::string_view status_name(CandidateStatus status);

struct VerifyRun {
  std::int32_t replicas = 0;
  ProbeResult result;
};

struct CandidateResult {
  Candidate candidate;
  CandidateStatus status = CandidateStatus::pruned;
  std::string reason;  // why not ok
  std::int32_t gpus_per_replica = 0;
  double price_per_gpu_hour = 0;
  std::int32_t num_gpu_blocks = 0;  // per replica
  std::int32_t max_model_len = 0;   // what a replica serves (with auto: what fits); 0: not built
  CapacityResult capacity;
  std::int32_t replicas_estimated = 0, replicas = 0, gpus = 0;
  std::vector<VerifyRun> verify;  // cluster checks, in order
  double cost_per_hour = 0;             // gpu_cost_per_hour + energy_cost_per_hour: what the ranking sorts by
  double gpu_cost_per_hour = 0;         // GPUs x price_per_gpu_hour
  double energy_cost_per_hour = 0;      // average power of the cluster check x --energy-price (0 without)
  double cost_per_m_output_tokens = 0;  // the cluster at the planned rate
  // One replica run at its SLO capacity: what the hardware costs per million
  // output tokens when the load grows into it (comparable across candidates,
  // unlike the figure above, which every 1-replica candidate shares).
  double cost_per_m_output_tokens_at_capacity = std::numeric_limits<double>::quiet_NaN();
  double latency_ms = std::numeric_limits<double>::quiet_NaN();  // the plan's latency axis at the chosen point (NaN: none)
  // Energy (issue 44; NaN: not known). Provisioned: every GPU of the sized
  // cluster at its max board power; the others from the last cluster check.
  double max_power_per_gpu_w = std::numeric_limits<double>::quiet_NaN();
  double provisioned_power_w = std::numeric_limits<double>::quiet_NaN();
  double average_power_w = std::numeric_limits<double>::quiet_NaN();
  double joules_per_output_token = std::numeric_limits<double>::quiet_NaN();
  bool has_floor = false;
  LatencyFloor floor;
  // Issue 45: rejected before any probe, an SLO out of reach at zero load
  // (planner/slo_reach.hpp; status slo_unmet, the reason says which);
  // zero_load_ratio is that bound over the SLO's threshold.
  bool rejected_before_probing = false;
  double zero_load_ratio = std::numeric_limits<double>::quiet_NaN();
};

struct PlanResult {
  std::string trace_path;
  std::size_t trace_requests = 0, probe_requests = 0, verify_requests = 0;
  double trace_rate = 0, mean_output_tokens = 0;
  double planned_rate = 0;    // what the deployment is sized for: target_rate, else trace_rate
  bool rate_is_target = false;  // planned_rate came from --target-rate
  std::string chosen_vllm_serve;  // the chosen candidate's `vllm serve` line (planner/vllm_command.hpp); empty: none chosen
  std::string slos;              // canonical
  std::string latency_metric;    // e.g. "ttft_p90"
  double tolerance = 0;
  CapacitySearch capacity_search = CapacitySearch::from_saturation;
  std::vector<CandidateResult> candidates;  // enumeration order
  std::vector<std::size_t> ranking;         // ok candidates, cheapest first
  std::vector<std::size_t> pareto;          // ok candidates on the cost/latency front, cheapest first
  std::vector<std::size_t> closest;         // when nothing is ok: the nearest misses, best first
  std::int64_t chosen = -1;                 // index into candidates; -1: none
  std::int32_t prompt_len_for_floor = 0;
  // A stop (PlanOptions::stop) left candidates unevaluated: `candidates`
  // holds those evaluated, of candidates_enumerated.
  bool interrupted = false;
  std::size_t candidates_enumerated = 0;
};

// The mean arrival rate a plan sizes for: options.target_rate when given,
// else the trace's rate over the cluster check's requests.
double planned_rate(const LoadedTrace& trace, const PlanOptions& options);

// Validates the options (UsageError for an empty SLO list, unknown names,
// bad numbers) before any simulation.
void check_plan_options(const PlanOptions& options);

// Evaluates one candidate: pruning, capacity, sizing, verification, cost.
CandidateResult evaluate_candidate(const Candidate& c, const LoadedTrace& trace, const PlanOptions& options);

// The whole plan in one process (threads).
PlanResult run_plan(const LoadedTrace& trace, const PlanOptions& options);

// The pieces run_plan is made of, for a run split over MPI ranks: the
// candidates, the results of some of them, and the assembly of all results.
std::vector<Candidate> plan_candidates(const PlanOptions& options);
std::vector<CandidateResult> evaluate_some(const std::vector<Candidate>& candidates, const std::vector<std::size_t>& which,
                                           const LoadedTrace& trace, const PlanOptions& options);
PlanResult assemble_plan(const LoadedTrace& trace, const PlanOptions& options, std::vector<CandidateResult> results);

// Runs of a candidate (capacity probes and cluster checks) and how many of
// them simulate's overload warning flagged (ProbeResult::overloaded).
struct OverloadCount {
  std::size_t overloaded = 0, runs = 0;
};
OverloadCount overload_count(const CandidateResult& r);

// Exact round trip (doubles in shortest round-trip form, NaN as null): how
// results travel between ranks, and the candidate entries of plan.json.
nlohmann::ordered_json candidate_result_json(const CandidateResult& r);
CandidateResult candidate_result_from_json(const nlohmann::json& j);

}  // namespace twin
