#pragma once
// The discrete-event loop: replicas of engine/core driven on a virtual clock,
// a cost model in place of each replica's GPUs, the core's router in front.
// Arrivals are pulled from the source one at a time and records pushed to the
// sink as requests end, so memory grows with the requests in flight, not with
// the trace.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/core/record_stream.hpp"
#include "engine/core/records.hpp"
#include "engine/core/replica.hpp"
#include "engine/core/request.hpp"
#include "engine/core/router.hpp"
#include "sim/cost_model.hpp"
#include "sim/event_queue.hpp"

namespace twin {

// One replica as the simulator runs it.
struct SimReplicaSpec {
  ReplicaConfig config;                 // kv.num_blocks already planned
  std::shared_ptr<CostModel> cost_model;  // shared by a group's replicas
  std::int32_t pipeline_stages = 1;
};

struct SimOptions {
  RouterPolicy router = RouterPolicy::round_robin;
  std::uint64_t seed = 0;
  bool record_steps = false;  // pass StepRecords to the sink
  // Called now and then (every few thousand events) with the virtual time and
  // the number of arrivals so far.
  std::function<void(Time now, std::int64_t arrivals)> progress;
};

struct SimStats {
  Time end_time = 0;               // virtual time of the last event
  std::int64_t arrivals = 0;
  std::int64_t steps = 0;          // plans executed, all replicas
  std::int64_t events = 0;
  std::int64_t max_in_flight = 0;  // requests admitted and not ended, peak over the run
  std::int64_t unserved = 0;       // left when the events ran out (aborted)
  std::vector<double> busy_fraction;  // per replica: first stage busy time / end time
};

class Simulator {
 public:
  Simulator(std::vector<SimReplicaSpec> replicas, SimOptions options);
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  std::int32_t num_replicas() const;
  const Replica& replica(std::int32_t index) const;

  // Runs until every request has ended. Call once.
  SimStats run(RequestSource& source, RecordSink& sink);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace twin
