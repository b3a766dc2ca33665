#include "engine/runtime/wall_clock_driver.hpp"

#include <chrono>
#include <optional>
#include <span>

#include "base/error.hpp"
#include "engine/core/serving_loop.hpp"
#include "engine/core/timeline.hpp"
#include "engine/runtime/wall_clock.hpp"

namespace twin {

DriveStats drive_wall_clock(std::span<Replica> replicas, std::span<Executor* const> executors, RequestSource& source,
                            RecordSink& sink, const DriveOptions& options) {
  if (!(options.time_scale > 0)) throw UsageError("time scale must be positive");
  const auto start = std::chrono::steady_clock::now();
  // The client's timeline: a request is due when the client sends it, its
  // arrival (and its patience) replayed time_scale times faster, or at once.
  // Clients that react to ends (traces/clients.hpp) already say when each
  // request is due, on a timeline laid under them: they are served as given.
  const bool clients = dynamic_cast<ClientSource*>(&source) != nullptr;
  if (clients && (options.asap || options.time_scale != 1.0)) {
    throw UsageError("wall-clock driver: a client source brings its own timeline (lay asap or the time scale under it)");
  }
  std::optional<ReplayedSource> replayed;
  if (!clients) {
    replayed.emplace(source, options.asap ? ReplayedSource::Mode::at_once : ReplayedSource::Mode::faster,
                     options.time_scale);
  }
  RequestSource& timeline = clients ? source : *replayed;
  WallClock clock(executors, replicas, options.token_seed, options.stop, options.on_output);
  ServingOptions loop_options;
  loop_options.record_steps = true;
  loop_options.disagg = options.disagg;
  ServingLoop<WallClock> loop(replicas, clock, loop_options);
  const ServingStats served = loop.run(timeline, sink);

  DriveStats stats;
  stats.submitted = served.arrivals;
  stats.steps = served.steps;
  stats.unserved = served.unserved;
  stats.stopped = served.stopped;
  stats.interrupted = served.interrupted;
  stats.handoffs = served.handoffs;
  stats.transfers = served.transfers;
  stats.kv_copied_blocks = clock.copied_blocks();
  stats.kv_copy_time = clock.copy_ns();
  stats.end_time = clock.last_end();
  stats.wall_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

DriveStats drive_wall_clock(Replica& replica, Executor& executor, RequestSource& source, RecordSink& sink,
                            const DriveOptions& options) {
  Executor* const executors[] = {&executor};
  return drive_wall_clock(std::span<Replica>(&replica, 1), executors, source, sink, options);
}

}  // namespace twin
