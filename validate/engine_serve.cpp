#include "validate/engine_serve.hpp"

#include <map>

#include "engine/runtime/engine_run.hpp"

namespace twin {

RunRecords serve_on_engine(Engine& engine, const std::vector<Request>& trace, const std::filesystem::path& dir,
                           bool overwrite, const nlohmann::ordered_json& echo, const std::function<bool()>& stop,
                           bool* stopped) {
  RunRecords records;
  EngineRunOptions options;
  options.token_seed = engine.settings().runner.seed;  // as `twinserve run --seed`
  options.stop = stop;
  options.files.out_dir = dir.string();
  options.files.overwrite = overwrite;
  // Exact whatever the size: the records are kept in memory anyway.
  options.exact_percentile_requests = CollectorOptions::kAlwaysExact;
  options.on_request = [&](const RequestRecord& r) { records.requests.push_back(r); };
  options.on_step = [&](const StepRecord& s) { records.steps.push_back(s); };
  VectorSource source(trace);
  EngineRunResult run = run_engine(engine, source, options, echo);
  records.summary = std::move(run.summary);
  if (stopped) *stopped = run.stats.stopped;
  if (engine.runner().times_ops()) {
    std::map<std::uint64_t, OpTimes> by_step(engine.step_op_times().begin(), engine.step_op_times().end());
    for (const StepRecord& s : records.steps) {
      const auto it = by_step.find(s.step_id);
      if (it == by_step.end()) {  // a step the executor did not run: no op table rather than a wrong one
        records.step_op_ns.clear();
        break;
      }
      records.step_op_ns.push_back(it->second);
    }
  }
  return records;
}

}  // namespace twin
