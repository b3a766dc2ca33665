#pragma once
// The capacity of one replica configuration: the highest arrival rate it
// sustains while meeting the SLOs on the trace's length mix. Each probe
// replays the trace's first requests with arrivals rescaled to the probe
// rate and simulates one replica. A rate above the replica's saturated
// throughput (the same requests all at t=0) never passes: past it a queue
// grows without bound, which a short probe may not live long enough to show
// in its latencies. So the first probe, the saturated one, bounds the
// search from above, and the search walks down from it to the SLO boundary,
// then bisects until the boundary is bracketed within a relative tolerance
// (docs/plan.md, "Capacity of one replica").
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "metrics/slo.hpp"
#include "metrics/summary.hpp"
#include "planner/loaded_trace.hpp"
#include "sim/cluster_config.hpp"
#include "traces/clients.hpp"

namespace twin {

// What a plan keeps of one simulation.
struct ProbeResult {
  double rate = 0;          // req/s offered
  bool pass = false;
  std::vector<double> slo_measured_ms;  // per SLO: the percentile (NaN without one)
  std::vector<double> slo_fraction_met;
  LatencyStats ttft_ms, tpot_ms, e2el_ms;  // the run's, as summary.json gives them
  double output_throughput = 0;  // tok/s
  double request_throughput = 0;  // req/s served (completed over the run's duration)
  std::uint64_t completed = 0, rejected = 0, aborted = 0, unserved = 0;
  double worst_ratio = 0;  // max over SLOs of measured / threshold (per-request SLOs: 1 + share missed)
  // The rate is above what the replica serves saturated: it fails whatever
  // its SLOs say (a short probe's burst can meet them without being
  // sustainable).
  bool above_saturation = false;
  // simulate's overload warning held for this run (metrics/backlog.hpp): the
  // queue grew all along, so its latencies measure the queue. It fails the
  // SLO verdict whatever the latencies say: the rate is not sustained.
  bool overloaded = false;
  // With clients (--max-concurrency, --sessions): the most requests in
  // flight at once, counted at the client (planner/client_run.hpp); 0 without.
  std::int64_t peak_in_flight = 0;
  // The run's energy per output token (issue 44); NaN: not known.
  double joules_per_output_token = std::numeric_limits<double>::quiet_NaN();
};

// One statistic of a metric (e.g. &LatencyStats::p90), NaN without data (a
// run where no request finished).
double stat_or_nan(const LatencyStats& stats, double LatencyStats::*field);

// The SLO verdict of one run: every SLO with a percentile within its
// threshold, every per-request SLO met by every request, nothing aborted or
// left unserved, and not overloaded.
ProbeResult judge(const Summary& summary, std::int64_t unserved, double rate);

// How the capacity is bracketed before the bisection.
enum class CapacitySearch {
  // From the saturated throughput s (nothing above it passes): probes at
  // s / (1 + tolerance)^(2^k), k = 0, 1, 2, ..., down to the first pass. A
  // replica whose capacity is within the tolerance of s needs one probe.
  from_saturation,
  // The search of plans before issue 45: from start_rate, doubled while
  // probes pass (halved while they fail); kept to compare against
  // (bench_plan) and to reproduce older plans' numbers, so a plan with it
  // also skips the early rejection (planner/slo_reach.hpp).
  doubling,
};
std::string_view capacity_search_name(CapacitySearch search);

struct CapacityOptions {
  std::size_t probe_requests = 2000;  // first requests of the trace per probe (0: all)
  double tolerance = 0.02;             // bisect until (hi - lo) <= tolerance * lo
  double start_rate = 1.0;             // req/s: doubling's first probe; both give up below start_rate / 2^steps
  int max_bracket_steps = 16;          // bracketing probes before giving up
  CapacitySearch search = CapacitySearch::from_saturation;
  ClientOptions clients;               // how each probe's requests are sent (none: at their times)
  // Probes and cluster checks skip the prefix cache's bookkeeping where it
  // cannot change the run (planner/quiet_cache_run.hpp); false runs every
  // one as configured: the same bytes, slower (what the tests compare).
  bool skip_unused_prefix_cache = true;
};

struct CapacityResult {
  bool feasible = false;  // some probe passed
  double capacity = 0;    // highest passing rate, req/s
  // Lowest failing rate, or the saturated throughput when no probe below it
  // failed (every rate above it fails); 0: none found. When feasible and
  // nonzero, upper - capacity <= tolerance x capacity: the SLO boundary lies
  // between them.
  double upper = 0;
  // Requests/s of the probe's requests all arriving at t=0: the most the
  // replica serves; no rate above it passes.
  double saturated_rps = 0;
  std::vector<ProbeResult> probes;  // in the order run
};

// Simulates `config` (one replica) on the first probe_requests of the trace
// at `rate` req/s, sent by `clients`.
ProbeResult probe_rate(const ClusterConfig& config, const LoadedTrace& trace, std::size_t probe_requests, double rate,
                       const ClientOptions& clients = {}, bool skip_unused_prefix_cache = true);

CapacityResult find_capacity(const ClusterConfig& config, const LoadedTrace& trace, const CapacityOptions& options);

// Zero-load floors of one replica: TTFT of a lone request with a prompt of
// `prompt_len` tokens, and TPOT of a lone request decoding `output_len`
// tokens after it. What no amount of replicas can beat.
struct LatencyFloor {
  std::int32_t prompt_len = 0;
  double ttft_ms = 0, tpot_ms = 0;
};
LatencyFloor latency_floor(const ClusterConfig& config, std::int32_t prompt_len, std::int32_t output_len);

}  // namespace twin
