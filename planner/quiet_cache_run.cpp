#include "planner/quiet_cache_run.hpp"

#include <algorithm>

namespace twin {
namespace {

bool names_no_prefix(const LoadedTrace& trace, std::size_t count) {
  const std::size_t n = count == 0 ? trace.requests.size() : std::min(count, trace.requests.size());
  return std::none_of(trace.requests.begin(), trace.requests.begin() + static_cast<std::ptrdiff_t>(n),
                      [](const Request& r) { return !r.hash_ids.empty() || !r.prompt_tokens.empty() || !r.generated.empty(); });
}

bool cache_can_be_skipped(const ClusterConfig& config, const LoadedTrace& trace, std::size_t count,
                          const ClientOptions& clients) {
  return !clients.sessions && config.kv_tiers.empty() && !has_pools(config) && config.router != "prefix_affinity" &&
         config.overrides.enable_prefix_caching != false && names_no_prefix(trace, count);
}

ClientRun run_once(const ClusterConfig& config, const LoadedTrace& trace, std::size_t count, double speedup,
                   const ClientOptions& clients) {
  ScaledTraceSource source(trace, count, speedup);
  RunOutputs outputs;
  return run_with_clients(config, source, clients, outputs);
}

}  // namespace

QuietCacheRun run_scaled_trace(const ClusterConfig& config, const LoadedTrace& trace, std::size_t count, double speedup,
                               const ClientOptions& clients, bool skip) {
  QuietCacheRun out;
  if (skip && cache_can_be_skipped(config, trace, count, clients)) {
    ClusterConfig quiet = config;
    quiet.overrides.enable_prefix_caching = false;
    out.sent = run_once(quiet, trace, count, speedup, clients);
    if (out.sent.run.summary.preemptions == 0) {
      out.cache_skipped = true;
      return out;
    }
    out.rerun = true;
  }
  out.sent = run_once(config, trace, count, speedup, clients);
  return out;
}

}  // namespace twin
