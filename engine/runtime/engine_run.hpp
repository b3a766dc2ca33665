#pragma once
// One engine run from a request source to the outputs: the engine's
// counterpart of sim/run.hpp's run_simulation. The engine is set up from an
// EngineSetup's settings (or given, built once for several runs), the requests are sent
// on the client's timeline (the trace's times, time_scale times faster, or
// every one at t = 0), as simulate sends them (traces/clients.hpp:
// --max-concurrency, --request-rate inf, sessions), served against the wall
// clock, and the records written through the one writer of result files
// (metrics/run_writer.hpp) with one config echo. `twinserve run`,
// `validate`'s engine runs and the tests call it; the commands only parse
// flags and print.
//
// Memory: the source is read one request ahead of the serving loop, as the
// simulator reads it, and the records go to the files as they end (the
// collector keeps exact percentiles up to exact_percentile_requests, then
// histograms). What is held is what the engine holds: the requests admitted
// and not ended. Every request at t = 0 (asap) admits the whole trace at once;
// --max-concurrency N bounds it to N.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/record_stream.hpp"
#include "engine/runtime/engine.hpp"
#include "engine/runtime/engine_setup.hpp"
#include "engine/runtime/wall_clock_driver.hpp"
#include "metrics/collector.hpp"
#include "metrics/run_writer.hpp"
#include "metrics/slo.hpp"
#include "metrics/summary.hpp"
#include "traces/clients.hpp"

namespace twin {

struct EngineRunOptions {
  // The client's timeline: the source's times time_scale times faster, or
  // every request at t = 0.
  double time_scale = 1.0;
  bool asap = false;
  // How the requests are sent over that timeline (none: as they come).
  ClientOptions clients;
  std::uint64_t token_seed = 0;  // prompt tokens of length-only and hash-id requests
  std::vector<Slo> slos;
  // Asked between steps: true stops the run (Ctrl-C). The requests in flight
  // end as "interrupted", the files are written whole and summary.json's
  // config says "interrupted": true (DriveOptions::stop).
  std::function<bool()> stop;
  RunFileOptions files;  // out_dir empty: no files
  std::string vllm_label = "twinserve-run";  // vllm_result.json's label
  // Completed requests kept one by one for exact percentiles; past it,
  // histograms (metrics/collector.hpp).
  std::uint64_t exact_percentile_requests = CollectorOptions::kDefaultExactRequests;
  // Every request record and every step record as they leave the run,
  // beside the files (a progress line; validate keeps them for its report).
  std::function<void(const RequestRecord&)> on_request;
  std::function<void(const StepRecord&)> on_step;
};

struct EngineRunResult {
  Summary summary;
  DriveStats stats;
  ClientReport clients;
  // Rejected requests by reason, the most frequent first. A reason may quote
  // its request's numbers, so at most kMaxReasons are told apart; the rest
  // are counted in other_rejections.
  static constexpr std::size_t kMaxReasons = 64;
  std::vector<std::pair<std::string, std::int64_t>> rejections;
  std::int64_t other_rejections = 0;
};

// Serves `source` on an engine already built (its weights and KV memory
// reused: a second call serves a second run from the same state). `echo`'s
// keys (the trace, the timeline) come first in summary.json's config, then
// the engine's settings and the run's outcome. Throws what the engine, the
// source and the writer throw.
EngineRunResult run_engine(Engine& engine, RequestSource& source, const EngineRunOptions& options,
                           const nlohmann::ordered_json& echo = nlohmann::ordered_json::object());

// Claims the output folder, then builds the engine from `settings` (what
// engine_settings() settles an EngineSetup to; a refused folder costs no
// weight load), calls `ready` with it (what a command prints about what it
// runs, and does just before serving) and serves `source` as above.
EngineRunResult run_engine(const EngineSettings& settings, RequestSource& source, const EngineRunOptions& options,
                           const nlohmann::ordered_json& echo = nlohmann::ordered_json::object(),
                           const std::function<void(const Engine&)>& ready = {});

}  // namespace twin
