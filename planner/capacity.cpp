#include "planner/capacity.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "planner/client_run.hpp"
#include "planner/quiet_cache_run.hpp"
#include "sim/run.hpp"

namespace twin {

double stat_or_nan(const LatencyStats& s, double LatencyStats::*field) {
  return s.count == 0 ? std::numeric_limits<double>::quiet_NaN() : s.*field;
}

ProbeResult judge(const Summary& summary, std::int64_t unserved, double rate) {
  ProbeResult p;
  p.rate = rate;
  p.completed = summary.completed;
  p.rejected = summary.rejected;
  p.aborted = summary.aborted;
  p.unserved = static_cast<std::uint64_t>(std::max<std::int64_t>(0, unserved));
  p.ttft_ms = summary.ttft_ms;
  p.tpot_ms = summary.tpot_ms;
  p.e2el_ms = summary.e2el_ms;
  p.output_throughput = summary.output_throughput;
  p.request_throughput = summary.request_throughput;
  p.overloaded = summary.overloaded;
  if (summary.energy.known) p.joules_per_output_token = summary.energy.joules_per_output_token;
  bool pass = summary.aborted == 0 && unserved == 0 && summary.completed > 0 && !summary.overloaded;
  double worst = 0;
  for (const SloResult& r : summary.slos) {
    p.slo_measured_ms.push_back(r.measured_ms);
    p.slo_fraction_met.push_back(r.request_fraction_met);
    if (r.slo.percentile > 0) {
      // A percentile with no data (e.g. TPOT when every output is one token)
      // cannot be missed.
      const bool no_data = std::isnan(r.measured_ms);
      if (!no_data && !r.percentile_met) pass = false;
      if (!no_data) worst = std::max(worst, r.measured_ms / r.slo.threshold_ms);
    } else {
      if (r.request_fraction_met < 1.0) pass = false;
      worst = std::max(worst, 2.0 - r.request_fraction_met);
    }
  }
  p.pass = pass;
  p.worst_ratio = worst;
  return p;
}

ProbeResult probe_rate(const ClusterConfig& config, const LoadedTrace& trace, std::size_t probe_requests, double rate,
                       const ClientOptions& clients, bool skip_unused_prefix_cache) {
  const double base = arrival_rate(trace, probe_requests);
  // A trace arriving all at once has no rate to scale: it stays a burst.
  const double speedup = base > 0 ? rate / base : std::numeric_limits<double>::infinity();
  const ClientRun sent =
      run_scaled_trace(config, trace, probe_requests, speedup, clients, skip_unused_prefix_cache).sent;
  ProbeResult p = judge(sent.run.summary, sent.run.stats.unserved, rate);
  p.peak_in_flight = sent.peak_in_flight;
  return p;
}

std::string_view capacity_search_name(CapacitySearch search) {
  return search == CapacitySearch::doubling ? "doubling" : "from_saturation";
}

namespace {

// One capacity search's probes, in the order run; a rate above the
// saturated throughput fails whatever its SLOs say.
struct Prober {
  const ClusterConfig& config;
  const LoadedTrace& trace;
  const CapacityOptions& options;
  CapacityResult& out;
  bool operator()(double rate) {
    ProbeResult p =
        probe_rate(config, trace, options.probe_requests, rate, options.clients, options.skip_unused_prefix_cache);
    if (p.pass && out.saturated_rps > 0 && rate > out.saturated_rps) {
      p.pass = false;
      p.above_saturation = true;
    }
    out.probes.push_back(std::move(p));
    return out.probes.back().pass;
  }
};

// The bracket [lo, hi] (0: none) of the earlier search: doubling from the
// start rate while probes pass, halving while they fail.
std::pair<double, double> bracket_by_doubling(Prober& probe, const CapacityOptions& o) {
  double lo = 0, hi = 0;
  double rate = o.start_rate;
  if (probe(rate)) {
    lo = rate;
    for (int i = 0; i < o.max_bracket_steps; ++i) {
      rate *= 2;
      if (!probe(rate)) return {lo, rate};
      lo = rate;
    }
    return {lo, hi};
  }
  hi = rate;
  for (int i = 0; i < o.max_bracket_steps; ++i) {
    rate /= 2;
    if (probe(rate)) return {rate, hi};
    hi = rate;
  }
  return {lo, hi};
}

// The bracket from the saturated throughput s, which no passing rate
// exceeds: s / (1 + tolerance) first, so a capacity within the tolerance of
// s takes one probe; each miss squares the step (s / 1.02, / 1.0404,
// / 1.0824, ...), reaching the lowest rate the doubling search tries
// (start_rate / 2^steps) in about log2 of the log of that range.
std::pair<double, double> bracket_from_saturation(Prober& probe, const CapacityOptions& o, double saturated) {
  const double lowest = o.start_rate / std::ldexp(1.0, o.max_bracket_steps);
  double hi = saturated;
  double step = 1 + o.tolerance;
  for (int i = 0; i < o.max_bracket_steps; ++i) {
    const double rate = std::max(saturated / step, lowest);
    if (rate >= hi) break;  // the lowest rate was tried (or is above the saturated throughput)
    if (probe(rate)) return {rate, hi};
    hi = rate;
    step *= step;
  }
  return {0, hi};
}

}  // namespace

CapacityResult find_capacity(const ClusterConfig& config, const LoadedTrace& trace, const CapacityOptions& o) {
  CapacityResult out;
  out.saturated_rps = probe_rate(config, trace, o.probe_requests, std::numeric_limits<double>::infinity(), o.clients,
                                 o.skip_unused_prefix_cache)
                          .request_throughput;
  Prober probe{config, trace, o, out};
  const bool from_saturation =
      o.search == CapacitySearch::from_saturation && std::isfinite(out.saturated_rps) && out.saturated_rps > 0;
  auto [lo, hi] = from_saturation ? bracket_from_saturation(probe, o, out.saturated_rps) : bracket_by_doubling(probe, o);
  if (lo > 0 && hi > 0) {
    // The relative slack keeps s / (1 + tolerance), whose gap to s is the
    // tolerance exactly, from bisecting once more on a rounding error.
    const double slack = from_saturation ? 1 + 1e-12 : 1;
    while (hi - lo > o.tolerance * lo * slack) {
      // Halving the ratio hi / lo (the geometric mean) meets a relative
      // tolerance in fewer probes from a wide bracket; the doubling search
      // keeps its arithmetic mean, so its numbers stay those of old plans.
      const double mid = from_saturation ? std::sqrt(lo * hi) : 0.5 * (lo + hi);
      (probe(mid) ? lo : hi) = mid;
    }
  }
  out.feasible = lo > 0;
  out.capacity = lo;
  out.upper = hi;
  return out;
}

LatencyFloor latency_floor(const ClusterConfig& config, std::int32_t prompt_len, std::int32_t output_len) {
  ClusterConfig one = config;
  for (auto& g : one.groups) g.count = 1;
  Request r;
  r.id = 0;
  r.arrival = 0;
  r.prompt_len = std::max(1, prompt_len);
  r.output_len = std::max(2, output_len);
  VectorSource source({r});
  RunOutputs outputs;
  const RunResult run = run_simulation(one, source, outputs);
  LatencyFloor f;
  f.prompt_len = r.prompt_len;
  f.ttft_ms = run.summary.ttft_ms.count ? run.summary.ttft_ms.mean : std::numeric_limits<double>::quiet_NaN();
  f.tpot_ms = run.summary.tpot_ms.count ? run.summary.tpot_ms.mean : std::numeric_limits<double>::quiet_NaN();
  return f;
}

}  // namespace twin
