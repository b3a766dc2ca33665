#include "engine/runtime/engine_run.hpp"

#include <algorithm>
#include <map>
#include <memory>

#include "engine/core/timeline.hpp"
#include "engine/runtime/energy_meter.hpp"
#include "metrics/config_echo.hpp"
#include "metrics/kv_tier_tally.hpp"
#include "metrics/result_sink.hpp"
#include "metrics/vllm_result.hpp"

namespace twin {
namespace {

ResultColumns engine_columns(const Engine& engine) {
  ResultColumns columns;
  columns.speculative = engine.settings().speculative.has_value();
  columns.transfer = engine.disaggregated();
  for (const KvTierConfig& t : engine.replica_config().kv.tiers) columns.tiers.push_back(t.name);
  return columns;
}

// Rejections counted by reason; a reason may quote its request's numbers,
// so the distinct ones kept are bounded.
class RejectionCount {
 public:
  void add(const RequestRecord& r) {
    if (r.outcome != Outcome::rejected) return;
    const std::string reason = r.reason.empty() ? "no reason" : r.reason;
    const auto it = by_reason_.find(reason);
    if (it != by_reason_.end()) {
      ++it->second;
    } else if (by_reason_.size() < EngineRunResult::kMaxReasons) {
      by_reason_.emplace(reason, 1);
    } else {
      ++other_;
    }
  }
  void into(EngineRunResult& result) const {
    result.rejections.assign(by_reason_.begin(), by_reason_.end());
    std::stable_sort(result.rejections.begin(), result.rejections.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    result.other_rejections = other_;
  }

 private:
  std::map<std::string, std::int64_t> by_reason_;
  std::int64_t other_ = 0;
};

// The source on the client's timeline, through the clients the options ask
// for. Without clients the driver lays the timeline itself (the source as
// given); with them the timeline goes under the clients, which the driver
// then serves as they say (their times are the wall clock's).
struct Sending {
  Sending(RequestSource& source, const EngineRunOptions& o) {
    if (!o.clients.any()) {
      served = &source;
      return;
    }
    timeline = std::make_unique<ReplayedSource>(
        source, o.asap ? ReplayedSource::Mode::at_once : ReplayedSource::Mode::faster, o.time_scale);
    clients = std::make_unique<Clients>(*timeline, o.clients);
    served = &clients->source();
  }
  DriveOptions drive_options(const EngineRunOptions& o) const {
    DriveOptions d;
    d.time_scale = clients ? 1.0 : o.time_scale;
    d.asap = clients ? false : o.asap;
    d.token_seed = o.token_seed;
    d.stop = o.stop;
    return d;
  }
  // On the heap, not in std::optional: GCC 12's -O2 sanitizer build saw
  // the optional's vtable pointer as maybe uninitialised (a false warning,
  // an error under -Werror) and broke `make fuzz-asan`.
  std::unique_ptr<ReplayedSource> timeline;
  std::unique_ptr<Clients> clients;
  RequestSource* served = nullptr;
};

// summary.json's config: the caller's keys (what it was asked to serve),
// the engine's settings, then what became of the run.
nlohmann::ordered_json run_echo(const Engine& engine, const nlohmann::ordered_json& echo, const DriveStats& stats) {
  nlohmann::ordered_json out = echo;
  const nlohmann::ordered_json settings = engine.config_echo();
  for (const auto& [key, value] : settings.items()) out[key] = value;
  out["unserved"] = stats.unserved;
  echo_stop(stats.stopped, stats.interrupted, out);
  return out;
}

EngineRunResult serve_and_write(Engine& engine, RunWriter& writer, RequestSource& source, const EngineRunOptions& o,
                                const nlohmann::ordered_json& echo) {
  writer.open(engine_columns(engine));
  MetricsCollector collector(CollectorOptions{o.exact_percentile_requests, o.slos});
  RejectionCount rejections;
  ResultSink sink(
      collector, writer.requests(), writer.steps(),
      [&](const RequestRecord& r) {
        rejections.add(r);
        writer.keep(r);
        if (o.on_request) o.on_request(r);
      },
      o.on_step);
  Sending sending(source, o);
  EngineRunResult result;
  // Measured energy beside the prediction (issue 44): the device's counter
  // over the serve, where one is readable.
  EnergyMeter meter = EnergyMeter::for_backend(engine.runner().backend_name());
  meter.start();
  result.stats = engine.serve(*sending.served, sink, sending.drive_options(o));
  const MeasuredEnergy measured = meter.stop(result.stats.wall_time_s);
  if (sending.clients) result.clients = sending.clients->report();

  const ReplicaConfig& rc = engine.replica_config();
  SummaryContext context;
  context.slos = o.slos;
  context.num_replicas = engine.num_replicas();
  context.kv_blocks_capacity = static_cast<std::int64_t>(rc.kv.num_blocks) * engine.num_replicas();
  context.disaggregated = engine.disaggregated();
  context.simulated_time_s = to_seconds(result.stats.end_time);
  context.wall_time_s = result.stats.wall_time_s;
  context.measured_energy = measured;
  context.config = run_echo(engine, echo, result.stats);
  result.summary = collector.summarize(context);
  if (!rc.kv.tiers.empty()) {
    KvTierTally tally;  // the engine's copies run inside its steps: no separate stall
    tally.add(engine.last_kv_stats(), engine.last_tier_stats(), rc.kv.tiers, rc.kv.num_blocks, rc.kv.block_size,
              static_cast<double>(engine.runner().kv_block_bytes()));
    tally.finish(result.summary, 0.0, false);
  }
  rejections.into(result);
  writer.finish(result.summary, {o.vllm_label, engine.model().name, vllm_result_date()});
  return result;
}

}  // namespace

EngineRunResult run_engine(Engine& engine, RequestSource& source, const EngineRunOptions& options,
                           const nlohmann::ordered_json& echo) {
  RunWriter writer(options.files);
  return serve_and_write(engine, writer, source, options, echo);
}

EngineRunResult run_engine(const EngineSettings& settings, RequestSource& source, const EngineRunOptions& options,
                           const nlohmann::ordered_json& echo, const std::function<void(const Engine&)>& ready) {
  RunWriter writer(options.files);  // before the weights load
  Engine engine(settings);
  if (ready) ready(engine);
  return serve_and_write(engine, writer, source, options, echo);
}

}  // namespace twin
