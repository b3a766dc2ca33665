#pragma once
// A planner simulation (a capacity probe or a cluster check: the trace's
// first requests replayed `speedup` times faster) that skips the prefix
// cache's bookkeeping where it cannot change the run (issue 45). Requests
// that name no prefix content (no hash ids, no tokens, no earlier answers)
// are never looked up in the cache except by themselves after a preemption
// (their own blocks, engine/core/kv_cache.cpp), so a run that preempts
// nothing is the same with prefix caching off, record for record; and on a
// large KV pool the publishing and evicting of blocks nothing will look up
// costs half a run or more (BlockPool::publish and pop_free: 47% of a
// 10,000-request check on an H200 TP 4). So the run goes first with prefix
// caching off and, if it preempted anything, again as configured. Not
// applied (the run as configured at once) with sessions, KV tiers, pools or
// the prefix_affinity router, or where the requests name prefix content.
#include <cstddef>

#include "planner/client_run.hpp"
#include "planner/loaded_trace.hpp"
#include "sim/cluster_config.hpp"
#include "traces/clients.hpp"

namespace twin {

struct QuietCacheRun {
  ClientRun sent;
  bool cache_skipped = false;  // the result is the run with prefix caching off (nothing preempted)
  bool rerun = false;          // tried without the cache, preempted, run again as configured
};

// `skip`: false runs as configured at once (the reference the tests compare with).
QuietCacheRun run_scaled_trace(const ClusterConfig& config, const LoadedTrace& trace, std::size_t count, double speedup,
                               const ClientOptions& clients, bool skip = true);

}  // namespace twin
