#include "validate/engine_serve.hpp"

#include <map>

#include "engine/runtime/energy_meter.hpp"

namespace twin {

RunRecords serve_on_engine(Engine& engine, const std::vector<Request>& trace, const std::filesystem::path& dir,
                           bool overwrite, const nlohmann::ordered_json& echo, const std::function<bool()>& stop,
                           bool* stopped) {
  RunRecorder recorder(dir, overwrite);
  DriveOptions options;
  options.token_seed = engine.settings().runner.seed;  // as `twinserve run --seed`
  options.stop = stop;
  VectorSource source(trace);
  EnergyMeter meter = EnergyMeter::for_backend(engine.runner().backend_name());  // issue 44
  meter.start();
  const DriveStats stats = engine.serve(source, recorder, options);
  const MeasuredEnergy measured = meter.stop(stats.wall_time_s);
  SummaryContext context;
  context.num_replicas = 1;
  context.kv_blocks_capacity = engine.replica_config().kv.num_blocks;
  context.wall_time_s = stats.wall_time_s;
  context.measured_energy = measured;
  context.config = echo;
  const nlohmann::ordered_json settings = engine.config_echo();
  for (const auto& [key, value] : settings.items()) context.config[key] = value;
  context.config["unserved"] = stats.unserved;
  if (stats.stopped) {
    context.config["interrupted"] = true;
    context.config["interrupted_requests"] = stats.interrupted;
  }
  if (stopped) *stopped = stats.stopped;
  RunRecords records = recorder.finish(context);
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
