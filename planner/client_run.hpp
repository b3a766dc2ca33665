#pragma once
// A planner simulation sent by the clients the options ask for
// (traces/clients.hpp: --max-concurrency, --request-rate inf, --sessions),
// as `simulate` sends a trace, with the most requests it ever had in flight
// counted at the client: what plan and sweep report beside a concurrency cap.
#include <cstdint>

#include "engine/core/record_stream.hpp"
#include "sim/run.hpp"
#include "traces/clients.hpp"

namespace twin {

struct ClientRun {
  RunResult run;
  // The most requests sent and not yet ended at one instant (0 when the
  // options ask for no clients: the trace's own times, nothing counted).
  std::int64_t peak_in_flight = 0;
};

// run_simulation over `source` behind the clients (none: `source` as it is).
ClientRun run_with_clients(const ClusterConfig& config, RequestSource& source, const ClientOptions& clients,
                           const RunOutputs& outputs);

}  // namespace twin
