// twinserve calibrate: times the engine's own ops for one model on this
// machine and writes a calibrated profile for `simulate --profile`; or,
// with --measured, fits a hardware profile to runs measured on a user's own
// deployment (docs/calibrate.md).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "base/error.hpp"
#include "engine/profiler/calibrate.hpp"
#include "engine/runtime/model_weights.hpp"
#include "hwprofiles/calibrated_profile.hpp"
#include "metrics/output_dir.hpp"
#include "models/model_desc.hpp"
#include "sim/data_parallel.hpp"
#include "tools/twinserve/measured_deployment.hpp"
#include "tools/twinserve/command_registry.hpp"
#include "tools/twinserve/flag_registry.hpp"
#include "tools/twinserve/common_flags.hpp"
#include "tools/twinserve/config_file.hpp"
#include "tools/twinserve/flag_checks.hpp"
#include "tools/twinserve/interrupt_guard.hpp"
#include "tools/twinserve/progress_line.hpp"
#include "tools/twinserve/scheduler_flags.hpp"
#include "validate/measured_calibration.hpp"

namespace twin::cli {
namespace {

struct CalibrateArgs {
  std::optional<std::string> model, weights;
  EngineFlags engine;
  std::string out;
  std::int32_t tp = 1, rounds = CalibrateOptions{}.rounds;
  std::int64_t max_tokens = 0;
  std::uint64_t seed = 0;
  bool quick = false, overwrite = false, quiet = false;
  // --measured: fit a hardware profile to measured runs of a deployment,
  // described by simulate's flags (--hw as the base profile).
  std::vector<std::string> measured;
  TraceInputFlags in;
  std::string hw, fit_params, holdout_split;
  std::string profile;  // a calibrated base: its step model is fitted
  std::optional<std::int32_t> pp, dp;
  bool enable_expert_parallel = false;
  SchedulerFlags sched;
  EngineMemoryFlags memory;
  std::int32_t max_evals = 300;
  bool no_cross_validate = false;
};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= text.size() && !text.empty()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    if (comma > at) out.push_back(text.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

// The measured deployment, from the flags validate --measured shares.
ClusterConfig measured_deployment(const CalibrateArgs& a, const std::string& hw, const CLI::App& sub) {
  ClusterConfig c;
  c.groups.emplace_back();
  ReplicaGroupConfig& g = c.groups.front();
  g.model = *a.model;
  g.hardware = hw;
  g.profile = a.profile;
  g.tp = a.tp;
  if (a.pp) g.pp = *a.pp;
  if (a.dp) g.dp = *a.dp;
  g.enable_expert_parallel = a.enable_expert_parallel;
  // A DP instance's arrivals go through vLLM's coordinator, as in simulate.
  c.router = data_parallel_router(c);
  apply_deployment_flags(c, a.engine, a.sched, a.memory, sub);
  c.seed = a.seed;
  return c;
}

void run_measured(const CalibrateArgs& a, const CLI::App& sub) {
  for (const char* flag : {"--weights", "--quick", "--rounds", "--max-tokens", "--backend", "--threads",
                           "--kv-cache-memory-bytes", "--swap-space"}) {
    if (sub.count(flag) > 0) throw UsageError(std::string(flag) + " times the engine; --measured fits measured runs");
  }
  if (!a.model) throw UsageError("calibrate --measured needs --model (the model the runs served)");
  // With a calibrated base the hardware profile only plans the memory: the
  // one calibrate matched the device to, unless --hw names another.
  std::string hw = a.hw;
  if (hw.empty() && !a.profile.empty()) {
    hw = load_calibrated_profile(a.profile).metadata.hardware;
    if (hw.empty()) throw UsageError("--profile " + a.profile + " names no hardware (metadata.hardware): give --hw for the memory plan");
  }
  if (hw.empty()) throw UsageError("calibrate --measured needs --hw (the base hardware profile of the GPU the runs ran on, e.g. h100-80gb) or --profile (a calibrated profile)");
  if (!a.holdout_split.empty() && a.holdout_split != "time")
    throw UsageError("--holdout-split: expected \"time\" (fit on the first half of each run's time span), got \"" + a.holdout_split + "\"");
  const std::filesystem::path out_path(a.out);
  const OutputDir out_dir(out_path.has_parent_path() ? out_path.parent_path() : ".", a.overwrite,
                          {out_path.filename().string()});
  MeasuredCalibrationOptions o;
  o.runs = a.measured;
  if (!a.in.path.empty()) o.traces = {a.in.path};
  o.read = trace_read_options(a.in);
  o.max_requests = a.in.max_requests;
  o.base_hardware = hw;
  o.base_profile = a.profile;
  o.cluster = measured_deployment(a, hw, sub);
  o.params = split_list(a.fit_params);
  o.max_evals = a.max_evals;
  o.time_split = a.holdout_split == "time";
  o.cross_validate = !a.no_cross_validate;
  if (!a.quiet) o.progress = [](const std::string& line) { std::cerr << "calibrate: " << line << "\n"; };
  // The first Ctrl-C or SIGTERM ends the fit's search at the best point so
  // far; that profile is written, marked, and the exit says so.
  const InterruptGuard interrupts;
  o.stop = [] { return InterruptGuard::stop_requested(); };
  const MeasuredCalibration result = run_measured_calibration(o);
  {
    std::ofstream file = out_dir.open(out_path.filename().string());
    file << result.profile.dump(2) << "\n";
    if (!file) throw Error(a.out + ": write failed");
  }
  for (const std::string& w : result.fit.warnings) std::cerr << "calibrate: warning: " << w << "\n";
  print_calibration_report(std::cout, result);
  std::cout << "Wrote " << a.out << " (use it with " << (a.profile.empty() ? "--hw " : "--hw " + hw + " --profile ")
            << a.out << ")\n";
  if (result.fit.interrupted) {
    throw Interrupted("the fit stopped after " + std::to_string(result.fit.evaluations) + " simulations; " + a.out +
                      " holds the best parameters so far, without intervals (fitted_from: \"interrupted\": true)");
  }
}

void run(const CalibrateArgs& a, const CLI::App& sub) {
  if (!a.measured.empty()) return run_measured(a, sub);
  if (!a.profile.empty()) throw UsageError("--profile is the base a --measured fit starts from; calibrate --model writes one with --out");
  for (const char* flag : {"--data-parallel-size", "--enable-expert-parallel"}) {
    if (sub.count(flag) > 0)
      throw UsageError(std::string(flag) + " describes a measured deployment (with --measured); the engine is timed on one GPU");
  }
  if (!a.model && !a.weights) throw UsageError("calibrate needs --model NAME (or --weights DIR holding a config.json)");
  if (a.max_tokens < 0) throw UsageError("--max-tokens must be positive");
  // The profile's folder is created and found writable now, not after
  // minutes of timing.
  const std::filesystem::path out_path(a.out);
  const std::filesystem::path out_folder = out_path.has_parent_path() ? out_path.parent_path() : ".";
  const OutputDir out_dir(out_folder, a.overwrite, {out_path.filename().string()});
  const ModelDesc model = resolve_model(a.model.value_or(a.weights.value_or("")));
  CalibrateOptions o;
  o.engine = runner_options(a.engine, nullptr, a.seed);
  o.engine.weights_dir = a.weights.value_or("");
  o.tp = a.tp;
  o.max_tokens = a.max_tokens;
  o.quick = a.quick;
  o.rounds = a.rounds;
  o.progress = a.quiet ? nullptr : &std::cerr;
  // On a terminal, a line per phase (each round over the op grid, then the
  // step scenarios): done of its total, rate and ETA; cleared as the phase
  // ends, before the phase's own line.
  std::unique_ptr<ProgressLine> line;
  std::string line_phase;
  if (progress_line_shown(!a.quiet)) {
    o.on_progress = [&line, &line_phase](const std::string& phase, std::size_t done, std::size_t total) {
      if (!line || phase != line_phase) {
        line = std::make_unique<ProgressLine>("calibrate " + phase, phase == "steps" ? "runs" : "points", true);
        line_phase = phase;
      }
      line->update(static_cast<std::int64_t>(done), static_cast<std::int64_t>(total));
      if (done >= total) line->finish();
    };
  }
  // The first Ctrl-C or SIGTERM stops the timing at the next point: part
  // of the grid is no profile, so none is written and --out is untouched.
  const InterruptGuard interrupts;
  o.stop = [] { return InterruptGuard::stop_requested(); };
  std::optional<CalibratedProfile> timed;
  try {
    timed = calibrate(model, o);
  } catch (const CalibrationStopped& e) {
    throw Interrupted(std::string(e.what()) + "; no profile written (a profile needs the whole grid and the step fit)");
  }
  const CalibratedProfile& profile = *timed;
  write_calibrated_profile(a.out, profile);
  const StepOverhead& fit = profile.overhead;
  const std::string& quantization = profile.metadata.quantization;
  std::cout << "Calibrated " << profile.metadata.model << " (" << profile.metadata.dtype << " weights, "
            << (quantization.empty() ? "" : quantization_label(quantization) + ", ") << profile.metadata.kv_dtype
            << " KV) on " << profile.metadata.device << " in "
            << profile.metadata.seconds << " s; a step is its ops, each kind scaled to its in-situ time, + "
            << fit.base_ns / 1e3 << " us + " << fit.per_seq_ns / 1e3 << " us per seq, + up to " << fit.idle_ns / 1e3
            << " us after idling\n";
  if (fit.fit.steps > 0) {
    std::cout << "Step fit over " << fit.fit.steps << " engine steps: mean |error| " << fit.fit.mean_abs_error * 100
              << "%, max " << fit.fit.max_abs_error * 100 << "%; the ops timed alone sum to "
              << fit.fit.unscaled_ratio_mean << " x the step (" << fit.fit.unscaled_ratio_min << " to "
              << fit.fit.unscaled_ratio_max << "), timed in the steps to " << fit.fit.in_situ_ratio_mean << " x\n";
  }
  std::cout << "Wrote " << a.out << "\n";
}

const RegisterCommand registration{"calibrate", [](CLI::App& root) {
  auto args = std::make_shared<CalibrateArgs>();
  auto* sub = root.add_subcommand("calibrate", "Time the engine's ops on this machine: a calibrated profile for simulate --profile");
  auto& a = *args;
  add_flag(*sub, FlagId::model, a.model, "default: --weights' config.json");
  add_flag(*sub, FlagId::weights, a.weights);
  add_engine_flags(*sub, a.engine);
  add_flag(*sub, FlagId::tensor_parallel, a.tp, "the profile's (the engine runs 1)");
  sub->add_option("--max-tokens", a.max_tokens, "Top of the token grids (default 4096, quick 256; at most the model's context)")->check(int_range(0, kMaxInt32));
  add_flag(*sub, FlagId::seed, a.seed, "here random weights and prompt tokens");
  sub->add_flag("--quick", a.quick, "Coarse grid, few repeats (seconds for tiny; for tests)");
  sub->add_option("--rounds", a.rounds,
                  "Passes over the grid and the step scenarios, each point's repeats pooled (default 3): "
                  "machine noise then spreads over the tables instead of bending one")
      ->check(CLI::Range(1, 100));
  sub->add_option("--out", a.out, "Profile to write (JSON)")->required()->check(non_empty());
  add_switch(*sub, FlagId::overwrite, a.overwrite, "the profile --out");
  add_switch(*sub, FlagId::quiet, a.quiet, "nor the phase lines: nothing on stderr while timing");
  // --measured: fitting a deployment (docs/calibrate.md, "Fitting a
  // deployment"); the deployment's flags are simulate's groups.
  add_flag(*sub, FlagId::measured, a.measured,
           "fit --hw's free parameters to these runs instead of timing the engine: vLLM `bench serve "
           "--save-result --save-detailed` JSON, our requests.csv, a `twinserve bench` output folder, or scrapes "
           "of vLLM's or SGLang's /metrics (a file or a folder of them); RESULTS=TRACE gives a run its own trace")
      ->expected(1, -1);
  add_trace_input_flags(*sub, a.in, "With --measured: the trace the runs played, unless a run gives its own as RUN=TRACE (default: the runs' own lengths; scrapes need one)", false);
  add_flag(*sub, FlagId::hardware, a.hw, "with --measured: the base profile the fit starts from");
  add_flag(*sub, FlagId::profile, a.profile,
           "with --measured: fit this calibrated profile's step model (op_scale, step_base_us, step_per_seq_us) "
           "instead of --hw's roofline; writes a calibrated profile (--hw defaults to its metadata.hardware)");
  add_flag(*sub, FlagId::pipeline_parallel, a.pp, "with --measured: the deployment's");
  add_flag(*sub, FlagId::data_parallel, a.dp, "with --measured: the deployment's (vLLM's ranks, router dp_balance)");
  add_switch(*sub, FlagId::enable_expert_parallel, a.enable_expert_parallel, "with --measured: the deployment's");
  add_scheduler_flags(*sub, a.sched);
  add_engine_memory_flags(*sub, a.memory);
  sub->add_option("--fit-params", a.fit_params,
                  "With --measured: parameters to fit, comma-separated (default: all the runs' layout can identify): "
                  "compute_scale, memory_scale, attention_scale, host_overhead_us, collective_scale (allreduce_scale, "
                  "collective_latency_scale when named); "
                  "with --profile: op_scale, step_base_us, step_per_seq_us (gemm_op_scale, attention_op_scale when "
                  "named)");
  sub->add_option("--max-evals", a.max_evals, "With --measured: simulations per fit (default 300)")->check(int_range(4, 100000));
  sub->add_option("--holdout-split", a.holdout_split,
                  "With --measured: \"time\": fit on the first half of each run's time span, predict the second");
  sub->add_flag("--no-cross-validate", a.no_cross_validate, "With --measured: skip the leave-one-run-out fits");
  add_config_file_flag(*sub, nullptr);
  sub->callback([args, sub] { run(*args, *sub); });
}};

}  // namespace
}  // namespace twin::cli
