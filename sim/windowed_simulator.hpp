#pragma once
// The simulator with a router refresh period (docs/simulate.md, "Router
// refresh"): the router routes from what it saw at its last refresh
// (engine/core/router_snapshot.hpp), so between refreshes replicas do not
// interact and each advances on its own, on a thread of its own if asked.
//
// The timeline, period P, refresh instants k x P:
//   - at a refresh instant every replica has applied every event before it;
//     the router takes their figures, then routes, in arrival order, every
//     request arriving before the next refresh, from those figures and its
//     own count of what it has sent since;
//   - each request reaches its replica at its own arrival time (queued as
//     of then), as without a refresh period;
//   - each replica runs the one serving loop (engine/core/serving_loop.hpp)
//     over itself alone, up to the next refresh; refreshes with no arrival
//     before the next one are skipped (nothing would be routed there).
// Records are handed to the sink at each refresh, ordered by the time they
// were produced, ties by replica, then in the order the replica produced
// them. Which thread ran a replica changes nothing: same bytes for any
// number of threads.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/core/record_stream.hpp"
#include "engine/core/replica.hpp"
#include "sim/simulator.hpp"

namespace twin {

class RankGroup;

class WindowedSimulator {
 public:
  // `refresh` > 0; `jobs` threads (at most one per replica is used).
  // Thread w > 0 prices its replicas with the specs of more_specs() (cost
  // models keep per-step scratch state, so threads do not share them);
  // more_specs must give the same cluster as `replicas`.
  // `ranks` (null: one process): replica i runs on rank i mod K; every
  // rank reads the whole source and routes alike, the ranks swap the
  // replicas' figures, prefix hits and records at each refresh, and only
  // rank 0's sink gets records (all of them, in the one-process order).
  WindowedSimulator(std::vector<SimReplicaSpec> replicas, SimOptions options, Time refresh, int jobs,
                    const std::function<std::vector<SimReplicaSpec>()>& more_specs, RankGroup* ranks = nullptr);
  ~WindowedSimulator();
  WindowedSimulator(const WindowedSimulator&) = delete;
  WindowedSimulator& operator=(const WindowedSimulator&) = delete;

  std::int32_t num_replicas() const;  // all ranks'
  // Error for a replica on another rank.
  const Replica& replica(std::int32_t index) const;
  Time tier_load_stall() const;  // this rank's replicas

  // Asked once per refresh, on the calling thread (the command's Ctrl-C):
  // true routes nothing more; every replica then stops as the one loop
  // does (no plan starts, the requests in flight end as "interrupted") and
  // the stats say stopped. Across MPI ranks the ranks' answers travel with
  // the refresh's exchange, so all stop at the same refresh.
  void set_stop(std::function<bool()> stop);

  // Runs until every request has ended, or a stop. Call once. max_in_flight
  // in the stats is sampled at the refreshes.
  SimStats run(RequestSource& source, RecordSink& sink);

 private:
  struct State;
  struct Run;  // one call of run() (windowed_simulator.cpp)
  std::unique_ptr<State> state_;
};

}  // namespace twin
