#pragma once
// The simulator: replicas of engine/core served by the one serving loop
// (engine/core/serving_loop.hpp) on a virtual clock, a cost model in place
// of each replica's GPUs, the core's router in front. Arrivals are pulled
// from the source one at a time and records pushed to the sink as requests
// end, so memory grows with the requests in flight, not with the trace.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/core/record_stream.hpp"
#include "engine/core/replica.hpp"
#include "engine/core/serving_loop.hpp"
#include "hwprofiles/hardware_desc.hpp"
#include "sim/acceptance_model.hpp"
#include "sim/cost_model.hpp"
#include "sim/kv_transfer.hpp"
#include "sim/kv_tier_model.hpp"
#include "sim/rank_group.hpp"

namespace twin {

// One replica as the simulator runs it.
struct SimReplicaSpec {
  ReplicaConfig config;                 // kv.num_blocks already planned
  std::shared_ptr<CostModel> cost_model;  // shared by a group's replicas
  std::int32_t pipeline_stages = 1;
  // Speculative decoding's accepted counts (config.scheduler.num_speculative_tokens > 0).
  std::shared_ptr<AcceptanceModel> acceptance;
  // Prices loads from the KV tiers below HBM (config.kv.tiers; null: none).
  std::shared_ptr<const KvTierModel> tiers;
  // Energy (issue 44): each device's power figures (power.known false: the
  // energy is not known) and the devices of one pipeline stage.
  PowerDesc power;
  std::int32_t stage_gpus = 1;
};

// Router, seed, step records and progress: the serving loop's options.
using SimOptions = ServingOptions;
// busy_fraction, events and max_in_flight are the simulator's figures;
// stopped and interrupted say whether set_stop's hook ended the run early.
using SimStats = ServingStats;

// How the replicas advance (docs/simulate.md, "Router refresh").
struct WindowOptions {
  // 0: the router reads every replica's state at each arrival, one loop
  // serves them all. > 0: it reads them as of its last refresh, every this
  // many ns, and the replicas advance apart in between
  // (sim/windowed_simulator.hpp).
  Time router_refresh = 0;
  // Threads between refreshes (router_refresh > 0 only); the same bytes
  // out for any number.
  int jobs = 1;
  // Another copy of the replicas' specs, for each thread after the first.
  std::function<std::vector<SimReplicaSpec>()> more_specs;
  // MPI ranks sharing the replicas (router_refresh > 0; null: this process
  // runs them all). Only rank 0's sink gets records.
  RankGroup* ranks = nullptr;
};

class WindowedSimulator;

class Simulator {
 public:
  // `transfers` prices KV transfers when the replicas form prefill and
  // decode pools (their configs' roles); required then. UsageError for
  // jobs > 1 without a refresh period, or a refresh period with pools.
  Simulator(std::vector<SimReplicaSpec> replicas, SimOptions options,
            std::shared_ptr<KvTransferModel> transfers = nullptr, WindowOptions window = {});
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  std::int32_t num_replicas() const;
  const Replica& replica(std::int32_t index) const;
  // Step time spent waiting for loads from the KV tiers below HBM, all
  // replicas (docs/simulate.md, "KV tiers").
  Time tier_load_stall() const;

  // Stops the run early once `stop` returns true (asked at every turn of the
  // loop): no plan starts after it, the requests in flight end as
  // "interrupted" and the result says stopped. With a router refresh
  // period it is asked once per refresh (WindowedSimulator::set_stop).
  void set_stop(std::function<bool()> stop);

  // Runs until every request has ended. Call once. The source's requests
  // must come in arrival order (twin::Error naming the request otherwise).
  SimStats run(RequestSource& source, RecordSink& sink);

 private:
  struct State;
  std::unique_ptr<State> state_;
  std::unique_ptr<WindowedSimulator> windowed_;  // with a refresh period; state_ is then null
};

}  // namespace twin
