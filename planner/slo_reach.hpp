#pragma once
// Early rejection of a plan candidate: an SLO that one replica misses even
// with no load at all, so that no arrival rate passes and the capacity
// search need not run a probe (issue 45). The bound is a lone request's
// latency on an idle replica, less the host work of its first step (which a
// busy engine may hide behind the previous step, docs/op-costs.md), and it
// must exceed the threshold by kSloReachMargin (percentiles read from
// histograms are within 0.39%) before a candidate is rejected:
// - TTFT at percentile p: no request's TTFT is below its prompt's lone
//   TTFT, and the lone TTFT grows with the prompt, so the p-th percentile
//   is at least the lone TTFT of the probes' prompt at the lower rank of p
//   (the longest prompt for a per-request TTFT SLO);
// - TPOT and ITL: no decode step is shorter than a lone decode of one token
//   after a one-token prompt.
// E2E SLOs are left to the search. No bound is claimed where a loaded
// request can beat a lone one or the counted requests can change: prompts
// with prefix-cache content (hash ids, tokens), sessions, a request the
// replica rejects (longer than max_model_len), prefill:decode pools (the KV
// transfer is paid per request).
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "metrics/slo.hpp"
#include "planner/loaded_trace.hpp"
#include "sim/cluster_config.hpp"
#include "traces/clients.hpp"

namespace twin {

inline constexpr double kSloReachMargin = 0.01;

struct UnreachableSlo {
  std::string reason;  // "cannot meet ttft_p90<=50ms at any load: ..."
  double ratio = 0;    // the zero-load bound over the threshold (> 1 + margin)
};

// The first SLO `one` (a one-replica config) misses at every load on the
// trace's first probe_requests (0: all), or nullopt when none is shown out
// of reach (then the capacity search decides).
std::optional<UnreachableSlo> unreachable_slo(const ClusterConfig& one, const LoadedTrace& trace,
                                              std::size_t probe_requests, const std::vector<Slo>& slos,
                                              const ClientOptions& clients);

}  // namespace twin
