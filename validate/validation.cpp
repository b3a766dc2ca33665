#include "validate/validation.hpp"

#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>

#include "base/error.hpp"
#include "engine/runtime/model_config.hpp"
#include "engine/runtime/model_runner.hpp"
#include "engine/runtime/engine.hpp"
#include "hwprofiles/calibrated_profile.hpp"
#include "hwprofiles/hardware_desc.hpp"
#include "metrics/output_dir.hpp"
#include "models/model_desc.hpp"
#include "sim/cluster.hpp"
#include "sim/replay_cost_model.hpp"
#include "traces/trace_reader.hpp"
#include "traces/trace_writer.hpp"
#include "validate/engine_serve.hpp"
#include "validate/load_scaling.hpp"
#include "validate/sim_serve.hpp"
#include "validate/trace_requests.hpp"

namespace fs = std::filesystem;

namespace twin {
namespace {

// The calibrated cost model is a cluster group's `profile` key.
void use_profile(ReplicaGroupConfig& group, const std::string& profile) { group.profile = profile; }

std::string load_folder(double load) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "load_%.2f", load);
  return buf;
}

void say(const ValidateOptions& o, const std::string& line) {
  if (o.progress) o.progress(line);
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace

std::string ValidationResult::roofline_caveat() const {
  if (roofline_hardware != "cpu") return "";
  return "the bundled cpu profile holds nominal peaks of no particular machine, so the roofline column is not a "
         "prediction of this one; the calibrated column is (pass --hw with a profile of this machine)";
}

bool ValidationResult::parity_exact() const {
  for (const LoadResult& l : loads) {
    if (!l.parity_error.empty() || !l.parity.exact()) return false;
  }
  return true;
}

std::vector<double> parse_loads(const std::string& text) {
  std::vector<double> out;
  if (!text.empty() && text.back() == ',') throw UsageError("--loads '" + text + "' ends with a comma; expected e.g. 0.3,0.6,0.9");
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != part.size() || !(v > 0) || !std::isfinite(v)) {
      throw UsageError("--loads: '" + part + "' is not a load; expected positive fractions of the predicted capacity, e.g. 0.3,0.6,0.9");
    }
    out.push_back(v);
  }
  if (out.empty()) throw UsageError("--loads is empty; expected e.g. 0.3,0.6,0.9");
  return out;
}

namespace {

void check_validate_options(const ValidateOptions& o) {
  if (o.profile.empty()) {
    throw UsageError("validate needs --profile FILE.json, a calibrated hardware profile: make one with "
                     "`twinserve calibrate --model " + (o.engine.model.empty() ? std::string("NAME") : o.engine.model) +
                     " --out FILE.json` (docs/validate.md)");
  }
  if (!fs::is_regular_file(o.profile)) throw Error("--profile " + o.profile + ": no such file");
  if (o.loads.empty()) throw UsageError("--loads is empty; expected e.g. 0.3,0.6,0.9");
  if (o.engine_repeats < 1 || o.engine_repeats > 10) {
    throw UsageError("--engine-repeats must be 1 to 10, got " + std::to_string(o.engine_repeats));
  }
  if (o.out_dir.empty()) throw UsageError("validate needs --out DIR");
}

// The engine is set up as `twinserve run` sets it up (engine/runtime/engine)
// with the profile's weight and KV dtypes and quantization: the engine runs
// what the profile timed, and a flag that says otherwise is refused.
EngineSetup engine_setup_for(const ValidateOptions& o, const ProfileMetadata& profile_meta) {
  auto engine_dtype = [&](const std::string& given, const std::string& measured, const char* flag) {
    // models/ names -> the engine's
    const std::string want = measured == "fp32" ? "f32" : measured == "fp8" ? "fp8_e4m3" : measured;
    if (!given.empty() && given != "auto" && resolve_kv_cache_dtype(given, "f32") != want) {
      throw UsageError(std::string(flag) + " " + given + " contradicts the profile " + o.profile + ", measured with " +
                       measured + "; leave it unset or calibrate with it");
    }
    return want;
  };
  EngineSetup setup = o.engine;
  setup.runner.weight_dtype = engine_dtype(o.engine.runner.weight_dtype, profile_meta.dtype, "--dtype");
  setup.runner.kv_cache_dtype = engine_dtype(o.engine.runner.kv_cache_dtype, profile_meta.kv_dtype, "--kv-cache-dtype");
  if (const std::string& given = o.engine.runner.quantization;
      !given.empty() && (given == "none" ? std::string() : given) != profile_meta.quantization) {
    const std::string measured = profile_meta.quantization.empty() ? "no quantization" : profile_meta.quantization;
    throw UsageError("--quantization " + given + " contradicts the profile " + o.profile + ", measured with " +
                     measured + "; leave it unset or calibrate with it");
  }
  setup.runner.quantization = profile_meta.quantization;
  setup.sampling.seed = o.engine.runner.seed;
  return setup;
}

// The simulators serve the engine's replica: its scheduler flags and
// context, and the blocks it allocated, priced on `hardware`'s roofline.
ClusterConfig roofline_cluster(const ValidateOptions& o, const ProfileMetadata& profile_meta, const Engine& engine,
                               const std::string& hardware) {
  ClusterConfig roofline;
  roofline.groups.emplace_back();
  roofline.groups.front().model = o.engine.model;
  roofline.groups.front().hardware = hardware;
  roofline.groups.front().dtype = profile_meta.dtype;
  roofline.groups.front().kv_dtype = profile_meta.kv_dtype;
  roofline.groups.front().quantization = profile_meta.quantization;
  roofline.scheduler_preset = o.engine.scheduler_preset;
  roofline.overrides = o.engine.overrides;
  roofline.overrides.max_model_len = engine.replica_config().scheduler.max_model_len;
  roofline.overrides.num_gpu_blocks.reset();
  roofline.num_gpu_blocks_override = engine.replica_config().kv.num_blocks;
  roofline.seed = o.engine.runner.seed;
  return roofline;
}

// What every load is served and simulated with.
struct ValidationRun {
  const ValidateOptions& o;
  Engine& engine;
  ClusterConfig calibrated, roofline;
  std::shared_ptr<CostModel> calibrated_model, roofline_model;
};

// The engine's runs of one load (run 1, then the repeats); false when an
// interrupt stopped one (a partial run is no measurement).
bool serve_load(const ValidationRun& v, const std::vector<Request>& scaled, const fs::path& dir,
                const nlohmann::ordered_json& echo, LoadResult& lr, std::vector<Summary>& repeat_summaries) {
  const ValidateOptions& o = v.o;
  bool stopped = false;
  lr.engine = serve_on_engine(v.engine, scaled, dir / "engine", o.overwrite, echo, o.stop, &stopped);
  for (std::int32_t k = 2; k <= o.engine_repeats && !stopped; ++k) {
    say(o, "load " + fixed(lr.load, 2) + ": engine run " + std::to_string(k) + " of " +
               std::to_string(o.engine_repeats) + " (repeatability)");
    const RunRecords again = serve_on_engine(v.engine, scaled, dir / ("engine_" + std::to_string(k)), o.overwrite,
                                             echo, o.stop, &stopped);
    lr.engine_repeats.push_back(compare_summaries(lr.engine.summary, again.summary));
    repeat_summaries.push_back(again.summary);
  }
  return !stopped;
}

// The calibrated and roofline predictions of one load, and the replay of
// the engine's own step times, compared with the engine's runs.
void predict_load(const ValidationRun& v, const std::vector<Request>& scaled, const fs::path& dir,
                  const nlohmann::ordered_json& echo, const std::vector<Summary>& repeat_summaries, LoadResult& lr) {
  const ValidateOptions& o = v.o;
  // The models' latency and throughput figures are measured as the median
  // over the engine runs; the per-request, step and parity comparisons
  // need one run's records and use run 1.
  std::vector<const Summary*> measured_runs{&lr.engine.summary};
  for (const Summary& s : repeat_summaries) measured_runs.push_back(&s);
  say(o, "load " + fixed(lr.load, 2) + ": simulating (calibrated, roofline, replay)");
  ModelResult cal{"calibrated", simulate_requests(v.calibrated, scaled, dir / "calibrated", o.overwrite, "calibrated",
                                                  nullptr, echo),
                  {}, {}, {}, {}};
  ModelResult roof{"roofline", simulate_requests(v.roofline, scaled, dir / "roofline", o.overwrite, "roofline", nullptr, echo),
                   {}, {}, {}, {}};
  auto replay = std::make_shared<ReplayCostModel>(lr.engine.steps, (dir / "engine" / "steps.csv").string());
  auto pricing = std::make_shared<PricingCostModel>(
      replay, std::vector<std::shared_ptr<CostModel>>{v.calibrated_model, v.roofline_model});
  try {
    lr.replay = simulate_requests(v.roofline, scaled, dir / "replay", o.overwrite, "replay", pricing, echo);
    lr.parity = compare_parity(lr.engine.requests, lr.replay.requests);
    if (replay->remaining() != 0) {
      lr.parity_error = std::to_string(replay->remaining()) + " recorded steps were never replayed";
    }
  } catch (const Error& e) {
    lr.parity_error = e.what();
  }
  lr.priced_steps = pricing->steps();
  std::size_t index = 0;
  for (ModelResult* m : {&cal, &roof}) {
    m->metrics = compare_to_runs(measured_runs, m->run.summary);
    m->request_errors = request_errors(lr.engine.requests, m->run.requests);
    m->step_errors = composition_errors(lr.priced_steps, index);
    m->op_errors = op_time_errors(lr.priced_steps, lr.engine.step_op_ns, index, v.engine.model().is_moe());
    ++index;
  }
  lr.models.push_back(std::move(cal));
  lr.models.push_back(std::move(roof));
}

// One load: its trace at load x capacity written to its folder, served on
// the engine and predicted. False when an interrupt stopped its engine run.
bool validate_load(const ValidationRun& v, const std::vector<Request>& trace, double load, double capacity_rps,
                   LoadResult& lr) {
  const ValidateOptions& o = v.o;
  lr.load = load;
  lr.rate_rps = load * capacity_rps;
  lr.folder = load_folder(load);
  const fs::path dir = o.out_dir / lr.folder;
  fs::create_directories(dir);
  const std::vector<Request> scaled = scale_to_rate(trace, lr.rate_rps);
  {
    TraceWriter writer((dir / "trace.jsonl").string(), o.overwrite);
    for (const Request& r : scaled) writer.write(r);
    writer.close();
  }
  nlohmann::ordered_json echo;
  echo["trace"] = (dir / "trace.jsonl").string();
  echo["load"] = load;
  echo["rate_rps"] = lr.rate_rps;
  say(o, "load " + fixed(load, 2) + ": " + fixed(lr.rate_rps, 3) + " req/s, serving " + std::to_string(scaled.size()) +
             " requests on the engine (" + fixed(to_seconds(scaled.back().arrival), 1) + " s of arrivals)");
  std::vector<Summary> repeat_summaries;
  if (!serve_load(v, scaled, dir, echo, lr, repeat_summaries)) return false;
  predict_load(v, scaled, dir, echo, repeat_summaries, lr);
  return true;
}

}  // namespace

ValidationResult run_validation(const ValidateOptions& o) {
  check_validate_options(o);
  // Created and found writable now, not after the model has loaded and the
  // first load has been served.
  const OutputDir out_dir(o.out_dir, o.overwrite, {"report.json", "report.md", "report.html"});
  ValidationResult result;
  result.model = o.engine.model;
  result.profile = o.profile;
  result.trace = o.trace;
  const std::vector<Request> trace = read_trace_requests(o.trace, o.read, o.max_requests);
  result.requests = static_cast<std::int64_t>(trace.size());
  result.trace_rate_rps = trace_rate(trace);

  // The simulations take the engine's block count, so all four sides serve
  // one replica of one size.
  const ProfileMetadata profile_meta = load_calibrated_profile(o.profile).metadata;
  Engine engine(engine_settings(engine_setup_for(o, profile_meta)));
  // Per-op times for the report's op table on the CPU backend, where a clock
  // read per op is free; on a GPU an event per op (hundreds per step) would
  // add host work to the very run being validated.
  engine.runner().set_time_ops(engine.runner().device_threads() > 0);
  result.engine_description = engine.description();
  say(o, "engine: " + result.engine_description);
  if (const std::string plan = engine.memory_plan_line(); !plan.empty()) say(o, plan);
  if (profile_meta.device != engine.runner().device_name()) {
    say(o, "warning: the profile was measured on '" + profile_meta.device + "', the engine runs on '" +
               engine.runner().device_name() + "'");
  }
  result.roofline_hardware = o.roofline_hardware.empty()
                                 ? hardware_for_device(engine.runner().backend_name(), engine.runner().device_name())
                                 : o.roofline_hardware;
  const ClusterConfig roofline = roofline_cluster(o, profile_meta, engine, result.roofline_hardware);
  ClusterConfig calibrated = roofline;
  use_profile(calibrated.groups.front(), o.profile);
  const ValidationRun v{o, engine, calibrated, roofline, cost_model_of(calibrated), cost_model_of(roofline)};

  // Capacity: the request throughput of a saturated run (every request at
  // t = 0), as the calibrated model predicts it.
  const RunRecords saturated = simulate_requests(v.calibrated, all_at_once(trace), {}, false, "calibrated");
  result.capacity_rps = saturated.summary.request_throughput;
  if (!(result.capacity_rps > 0)) throw Error("the calibrated model predicts no throughput for " + o.trace);
  say(o, "capacity: " + fixed(result.capacity_rps, 3) + " req/s predicted (calibrated, " +
             std::to_string(trace.size()) + " requests at t=0)");
  for (double load : o.loads) {
    if (o.stop && o.stop()) {
      result.interrupted = "";
      break;
    }
    LoadResult lr;
    if (!validate_load(v, trace, load, result.capacity_rps, lr)) {
      result.interrupted = lr.folder;
      break;
    }
    result.loads.push_back(std::move(lr));
  }
  return result;
}

}  // namespace twin
