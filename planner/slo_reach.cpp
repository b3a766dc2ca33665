#include "planner/slo_reach.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/error.hpp"
#include "planner/capacity.hpp"
#include "sim/cluster.hpp"
#include "sim/host_work.hpp"

namespace twin {
namespace {

// What the bounds need of the probes' requests; `usable` false where a
// loaded request could beat a lone one or the counted requests can change.
struct ProbeLengths {
  bool usable = true;
  bool decodes = false;               // some request has two or more output tokens
  std::vector<std::int32_t> prompts;  // sorted
};

ProbeLengths probe_lengths(const LoadedTrace& trace, std::size_t probe_requests, std::int32_t max_model_len) {
  ProbeLengths out;
  const std::size_t n = probe_requests == 0 ? trace.requests.size() : std::min(probe_requests, trace.requests.size());
  for (std::size_t i = 0; i < n && out.usable; ++i) {
    const Request& r = trace.requests[i];
    const bool cacheable = !r.hash_ids.empty() || !r.prompt_tokens.empty() || !r.generated.empty();
    const bool rejected = static_cast<std::int64_t>(r.prompt_len) + r.output_len > max_model_len;
    out.usable = !cacheable && !rejected && r.prompt_len >= 1;
    out.decodes = out.decodes || r.output_len >= 2;
    out.prompts.push_back(r.prompt_len);
  }
  out.usable = out.usable && !out.prompts.empty();
  std::sort(out.prompts.begin(), out.prompts.end());
  return out;
}

// The prompt at the lower rank of percentile p (numpy's linear rule
// interpolates upward from it); the longest for a per-request SLO.
std::int32_t prompt_at(const std::vector<std::int32_t>& sorted, double percentile) {
  if (percentile <= 0) return sorted.back();
  const double rank = percentile / 100.0 * static_cast<double>(sorted.size() - 1);
  return sorted[static_cast<std::size_t>(std::floor(rank))];
}

// "p90" of ttft_p90<=2000ms.
std::string percentile_text(const Slo& slo) {
  const std::string text = format_slo(slo);
  const std::size_t at = text.find("_p") + 1;
  return text.substr(at, text.find("<=") - at);
}

std::string ms_text(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g ms", ms);
  return buf;
}

}  // namespace

std::optional<UnreachableSlo> unreachable_slo(const ClusterConfig& one, const LoadedTrace& trace,
                                              std::size_t probe_requests, const std::vector<Slo>& slos,
                                              const ClientOptions& clients) {
  if (clients.sessions || has_pools(one) || one.groups.size() != 1) return std::nullopt;
  Cluster cluster;
  try {
    cluster = build_cluster(one);
  } catch (const Error&) {
    return std::nullopt;  // the caller prunes it with the reason
  }
  const GroupPlan& g = cluster.groups.front();
  const SchedulerConfig& sched = g.replica.scheduler;
  const ProbeLengths lengths = probe_lengths(trace, probe_requests, sched.max_model_len);
  if (!lengths.usable) return std::nullopt;
  const HostWork host = host_work_for(sched, g.hardware);
  const std::int32_t budget = effective_token_budget(sched);
  for (const Slo& slo : slos) {
    double bound = 0;
    std::string what;
    if (slo.metric == Metric::ttft) {
      const std::int32_t prompt = prompt_at(lengths.prompts, slo.percentile);
      const double hidden_ms = host_cost(host, 1, std::min(prompt, budget), 1, 1).host_ns / 1e6;
      bound = latency_floor(one, prompt, 2).ttft_ms - hidden_ms;
      what = "a lone request's TTFT for the probes' " +
             (slo.percentile > 0 ? percentile_text(slo) + " prompt" : std::string("longest prompt")) +
             " (" + std::to_string(prompt) + " tokens) is " + ms_text(bound);
    } else if ((slo.metric == Metric::tpot || slo.metric == Metric::itl) && lengths.decodes) {
      const double hidden_ms = host_cost(host, 1, 1, 1, 1).host_ns / 1e6;
      bound = latency_floor(one, 1, 2).tpot_ms - hidden_ms;
      what = "a lone decode step (one sequence, one token of context) takes " + ms_text(bound);
    } else {
      continue;
    }
    if (std::isfinite(bound) && bound > slo.threshold_ms * (1 + kSloReachMargin)) {
      return UnreachableSlo{"cannot meet " + format_slo(slo) + " at any load: " + what +
                                " on an idle replica (less the host work a busy engine hides); no probe was run",
                            bound / slo.threshold_ms};
    }
  }
  return std::nullopt;
}

}  // namespace twin
