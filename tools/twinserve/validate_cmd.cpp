// twinserve validate: the engine against the simulator on the same requests
// at several loads — calibrated prediction, exact replay parity, roofline
// baseline — with a report (docs/validate.md).
#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "base/error.hpp"
#include "tools/twinserve/measured_deployment.hpp"
#include "tools/twinserve/command_registry.hpp"
#include "tools/twinserve/flag_registry.hpp"
#include "tools/twinserve/common_flags.hpp"
#include "tools/twinserve/engine_setup_flags.hpp"
#include "tools/twinserve/config_file.hpp"
#include "tools/twinserve/flag_checks.hpp"
#include "tools/twinserve/interrupt_guard.hpp"
#include "tools/twinserve/scheduler_flags.hpp"
#include "sim/cluster_config.hpp"
#include "validate/measured_validation.hpp"
#include "validate/report.hpp"
#include "validate/validation.hpp"

namespace twin::cli {
namespace {

struct ValidateArgs {
  TraceInputFlags in;
  OutputFlags out{"validation", false};
  EngineFlags engine;
  EngineMemoryFlags memory;
  std::string model, profile, loads = "0.3,0.6,0.9", hw;
  std::int32_t engine_repeats = 1;
  std::uint64_t seed = 0;
  SchedulerFlags sched;
  bool no_plots = false, quiet = false;
  // --measured: the prediction against a run measured elsewhere.
  std::string measured, cluster_config;
  std::optional<std::int32_t> tp, pp;
};

// The deployment the measured run ran on: the cluster config JSON, if any,
// then the flags.
ClusterConfig measured_cluster(const ValidateArgs& a, const CLI::App& sub) {
  ClusterConfig c = a.cluster_config.empty() ? ClusterConfig{} : load_cluster_config(a.cluster_config);
  if (c.groups.empty()) c.groups.emplace_back();
  if (a.hw.empty() && a.cluster_config.empty()) {
    throw UsageError("validate --measured needs --hw (the hardware the measured run ran on, e.g. h100-80gb) or --cluster-config");
  }
  for (ReplicaGroupConfig& g : c.groups) {
    g.model = a.model;
    if (!a.hw.empty()) g.hardware = a.hw;
    if (!a.profile.empty()) g.profile = a.profile;
    if (a.tp) g.tp = *a.tp;
    if (a.pp) g.pp = *a.pp;
  }
  apply_deployment_flags(c, a.engine, a.sched, a.memory, sub);
  c.seed = a.seed;
  return c;
}

void run_measured(const ValidateArgs& a, const CLI::App& sub) {
  for (const char* flag : {"--loads", "--engine-repeats", "--backend", "--threads", "--kv-cache-memory-bytes", "--swap-space"}) {
    if (sub.count(flag) > 0) {
      throw UsageError(std::string(flag) + " is for validating the engine; --measured compares a run measured elsewhere");
    }
  }
  MeasuredValidateOptions o;
  o.measured = a.measured;
  o.trace = a.in.path;
  o.read = trace_read_options(a.in);
  o.max_requests = a.in.max_requests;
  o.cluster = measured_cluster(a, sub);
  o.out_dir = a.out.dir;
  o.overwrite = a.out.overwrite;
  // The first Ctrl-C or SIGTERM stops the prediction; its records are kept
  // in predicted/, and no report is written.
  const InterruptGuard interrupts;
  o.stop = [] { return InterruptGuard::stop_requested(); };
  const MeasuredValidation v = run_measured_validation(o);
  if (v.predicted.interrupted) {
    throw Interrupted("the prediction stopped; its records so far are in " + (o.out_dir / "predicted").string() +
                      " (summary.json: \"interrupted\": true); no report written");
  }
  {
    std::ofstream json(o.out_dir / "report.json", std::ios::binary);
    json << measured_report_json(v).dump(2) << "\n";
    if (!json) throw Error((o.out_dir / "report.json").string() + ": write failed");
    std::ofstream md(o.out_dir / "report.md", std::ios::binary);
    write_measured_report_markdown(md, v);
    if (!md) throw Error((o.out_dir / "report.md").string() + ": write failed");
  }
  print_measured_table(std::cout, v);
  if (v.run.gaps_left_out > 0) {
    std::cerr << "validate: " << v.run.gaps_left_out
              << " measured requests streamed several tokens per chunk; their gaps are left out of ITL\n";
  }
  if (v.run.prompt_mismatches > 0) {
    std::cerr << "validate: warning: " << v.run.prompt_mismatches
              << " measured prompt lengths differ from the trace's (first: " << v.run.first_prompt_mismatch << ")\n";
  }
  for (const std::string& w : v.warnings) std::cerr << "validate: warning: " << w << "\n";
  std::cout << "Wrote " << (o.out_dir / "report.md").string() << ", report.json, " << (v.scrape ? "" : "measured/ and ")
            << "predicted/\n";
}

void run(const ValidateArgs& a, const CLI::App& sub) {
  if (!a.measured.empty()) return run_measured(a, sub);
  if (!a.cluster_config.empty() || a.tp || a.pp) {
    throw UsageError("--cluster-config, --tp and --pp describe a measured deployment: they go with --measured");
  }
  ValidateOptions o;
  o.trace = a.in.path;
  o.read = trace_read_options(a.in);
  o.profile = a.profile;
  o.loads = parse_loads(a.loads);
  o.max_requests = a.in.max_requests;
  // The engine from the same flag groups as `run`'s, settled by the same
  // rule (engine_settings).
  o.engine = engine_setup_from_flags(a.model, a.sched, a.engine, a.memory, a.seed);
  o.roofline_hardware = a.hw;
  o.out_dir = a.out.dir;
  o.overwrite = a.out.overwrite;
  o.plots = !a.no_plots;
  o.engine_repeats = a.engine_repeats;
  if (!a.quiet) o.progress = [](const std::string& line) { std::cerr << "validate: " << line << "\n"; };

  const InterruptGuard interrupts;  // the first Ctrl-C stops the engine run, the loads finished are reported
  o.stop = [] { return InterruptGuard::stop_requested(); };
  const ValidationResult result = run_validation(o);
  if (result.interrupted && result.loads.empty()) {
    throw Interrupted("before any load finished" +
                (result.interrupted->empty() ? "" : "; the engine's records so far are in " +
                                                         (o.out_dir / *result.interrupted / "engine").string()) +
                "; no report written");
  }
  const std::string plot_note = write_plots(result, o.out_dir, o.plots);
  {
    std::ofstream json(o.out_dir / "report.json", std::ios::binary);
    json << report_json(result).dump(2) << "\n";
    if (!json) throw Error((o.out_dir / "report.json").string() + ": write failed");
    std::ofstream md(o.out_dir / "report.md", std::ios::binary);
    write_report_markdown(md, result, plot_note);
    if (!md) throw Error((o.out_dir / "report.md").string() + ": write failed");
    std::ofstream html(o.out_dir / "report.html", std::ios::binary);
    html << report_html(result);
    if (!html) throw Error((o.out_dir / "report.html").string() + ": write failed");
  }
  print_validation_table(std::cout, result);
  if (!plot_note.empty()) std::cerr << "validate: " << plot_note << "\n";
  std::cout << "Wrote " << (o.out_dir / "report.html").string() << " (the report), report.md and report.json\n";
  if (result.interrupted) {
    throw Interrupted("the report covers the " +
                std::to_string(result.loads.size()) + " loads finished" +
                (result.interrupted->empty() ? "" : "; the engine's records of the load it stopped are in " +
                                                         (o.out_dir / *result.interrupted / "engine").string()));
  }
  // A replay that does not reproduce the engine is a bug, never a figure.
  if (!result.parity_exact()) throw Error("replay parity failed: the simulator did not reproduce the engine's run (see report.md)");
}

const RegisterCommand registration{"validate", [](CLI::App& root) {
  auto args = std::make_shared<ValidateArgs>();
  auto* sub = root.add_subcommand("validate", "Engine vs simulator on the same requests at several loads, with a report; "
                                              "or (--measured) the simulator against a run measured elsewhere");
  auto& a = *args;
  add_trace_input_flags(*sub, a.in, "Request trace (any format `trace stats` reads); its arrivals are rescaled per load", true);
  add_flag(*sub, FlagId::model, a.model, "random weights from --seed")->required();
  add_flag(*sub, FlagId::profile, a.profile,
           "required; with --measured optional: the calibrated cost model instead of the roofline");
  sub->add_option("--loads", a.loads, "Fractions of the predicted capacity, comma-separated (default 0.3,0.6,0.9)");
  add_engine_flags(*sub, a.engine);
  add_flag(*sub, FlagId::seed, a.seed, "here random weights, prompt tokens and sampling");
  add_scheduler_flags(*sub, a.sched);
  add_engine_memory_flags(*sub, a.memory);
  add_flag(*sub, FlagId::hardware, a.hw,
           "the roofline column's (default: the engine's device, e.g. h200, cpu); with --measured: the hardware the "
           "measured run ran on");
  add_flag(*sub, FlagId::measured, a.measured,
           "compare the simulator with one instead of the engine: a requests.csv (run, bench) matched to --trace "
           "by id, `vllm bench serve --save-result --save-detailed` JSON matched to --trace by order, or scrapes "
           "of vLLM's or SGLang's /metrics taken before and after --trace was played (a file or a folder)")
      ->check(non_empty());
  add_flag(*sub, FlagId::tensor_parallel, a.tp, "with --measured: the measured deployment's");
  add_flag(*sub, FlagId::pipeline_parallel, a.pp, "with --measured: the measured deployment's");
  add_output_flags(*sub, a.out, "Output folder (default ./validation)", false);
  add_config_file_flag(*sub, &a.cluster_config,
                       "With --measured: a cluster config JSON describing the measured deployment (docs/simulate.md); "
                       "the flags override it");
  sub->add_option("--engine-repeats", a.engine_repeats,
                  "Engine runs per load (default 1): the measured figures are each metric's median over the runs, "
                  "and runs 2.. against run 1 show the machine's run-to-run noise")->check(int_range(1, 1000));
  add_switch(*sub, FlagId::no_plots, a.no_plots);
  add_switch(*sub, FlagId::quiet, a.quiet);
  sub->callback([args, sub] { run(*args, *sub); });
}};

}  // namespace
}  // namespace twin::cli
