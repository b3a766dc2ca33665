#pragma once
// Serves requests on the engine's replicas against the wall clock: the core's serving
// loop (engine/core/serving_loop.hpp), the simulator's, run over the wall
// clock (engine/runtime/wall_clock.hpp). Arrivals are submitted at their
// trace timestamps divided by time_scale, the cancel times with them
// (engine/core/timeline.hpp), or all at t = 0 with asap; every plan the core
// makes is executed for real and completed at the measured time. Requests
// come from a RequestSource and records go to a RecordSink, so the caller
// decides what to write. Several replicas with pool roles (prefill, decode)
// serve a disaggregated cluster in one process, the KV moved between their
// runners by the wall clock. Most callers want engine/runtime/engine_run.hpp,
// which builds the engine from one settings struct and writes the results.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/core/record_stream.hpp"
#include "engine/core/records.hpp"
#include "engine/core/replica.hpp"
#include "engine/core/request.hpp"
#include "engine/core/serving_loop.hpp"
#include "engine/runtime/executor.hpp"

namespace twin {

struct DriveOptions {
  double time_scale = 1.0;  // > 0: trace time / time_scale = wall time
  bool asap = false;        // submit every request at t = 0
  std::uint64_t token_seed = 0;  // prompt tokens for length-only / hash-id requests
  // Asked between steps (and every 50 ms while idle): true stops the run.
  // Requests not yet due are never submitted; those in flight end as
  // aborted with reason "interrupted"; their records still reach the sink.
  std::function<bool()> stop;
  // Replicas with pool roles: the loop's disaggregation mode and routers.
  DisaggOptions disagg;
  // Called with each request's generated tokens as it ends (tests compare
  // the tokens of two runs).
  std::function<void(const RequestRecord&, const std::vector<TokenId>&)> on_output;
};

struct DriveStats {
  std::int64_t submitted = 0;
  std::int64_t steps = 0;
  std::int64_t unserved = 0;  // could never be scheduled; aborted at the end
  bool stopped = false;        // DriveOptions::stop ended the run early
  std::int64_t interrupted = 0;  // requests in flight then, aborted as "interrupted"
  std::int64_t handoffs = 0;     // requests handed from a prefill to a decode replica
  std::int64_t transfers = 0;    // KV transfers done
  std::int64_t kv_copied_blocks = 0;  // blocks the transfers copied
  Time kv_copy_time = 0;              // ns the copies themselves took
  Time end_time = 0;          // wall ns since the start when the last request ended
  double wall_time_s = 0;
};

// A ClientSource (closed-loop clients, a concurrency limit) is served on
// its own timeline: time_scale 1 and no asap (UsageError otherwise).
// executors[i] runs replicas[i]'s steps (replica i's index is i). The
// source's requests must come in arrival order (twin::Error naming the
// request otherwise). Throws what the executors, the core, the source or
// the sink throw; UsageError for replicas whose roles form no cluster.
DriveStats drive_wall_clock(std::span<Replica> replicas, std::span<Executor* const> executors, RequestSource& source,
                            RecordSink& sink, const DriveOptions& options);
// One replica.
DriveStats drive_wall_clock(Replica& replica, Executor& executor, RequestSource& source, RecordSink& sink,
                            const DriveOptions& options);

}  // namespace twin
