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
#include "tools/twinserve/command_registry.hpp"
#include "tools/twinserve/common_flags.hpp"
#include "tools/twinserve/config_file.hpp"
#include "tools/twinserve/flag_checks.hpp"
#include "tools/twinserve/interrupt_guard.hpp"
#include "tools/twinserve/scheduler_flags.hpp"
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
};

void run(const ValidateArgs& a) {
  ValidateOptions o;
  o.trace = a.in.path;
  o.read = trace_read_options(a.in);
  o.profile = a.profile;
  o.loads = parse_loads(a.loads);
  o.max_requests = a.in.max_requests;
  // The engine from the same flag groups as `run`'s, settled by the same
  // rule (engine_settings).
  o.engine.model = a.model;
  o.engine.scheduler_preset = a.sched.preset.value_or("vllm");
  o.engine.overrides = scheduler_overrides(a.sched);
  o.engine.overrides.max_model_len = a.memory.max_model_len;
  o.engine.runner = runner_options(a.engine, &a.memory, a.seed);
  o.roofline_hardware = a.hw;
  o.out_dir = a.out.dir;
  o.overwrite = a.out.overwrite;
  o.plots = !a.no_plots;
  o.engine_repeats = a.engine_repeats;
  if (!a.quiet) o.progress = [](const std::string& line) { std::cerr << "validate: " << line << "\n"; };

  const InterruptGuard interrupts;  // the first Ctrl-C stops the engine run, the loads finished are reported
  o.stop = [] { return InterruptGuard::received() != 0; };
  const ValidationResult result = run_validation(o);
  if (result.interrupted && result.loads.empty()) {
    throw Error("interrupted by signal " + std::to_string(InterruptGuard::received()) + " before any load finished" +
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
    throw Error("interrupted by signal " + std::to_string(InterruptGuard::received()) + ": the report covers the " +
                std::to_string(result.loads.size()) + " loads finished" +
                (result.interrupted->empty() ? "" : "; the engine's records of the load it stopped are in " +
                                                         (o.out_dir / *result.interrupted / "engine").string()));
  }
  // A replay that does not reproduce the engine is a bug, never a figure.
  if (!result.parity_exact()) throw Error("replay parity failed: the simulator did not reproduce the engine's run (see report.md)");
}

const RegisterCommand registration{"validate", [](CLI::App& root) {
  auto args = std::make_shared<ValidateArgs>();
  auto* sub = root.add_subcommand("validate", "Engine vs simulator on the same requests at several loads, with a report");
  auto& a = *args;
  add_trace_input_flags(*sub, a.in, "Request trace (any format `trace stats` reads); its arrivals are rescaled per load", true);
  sub->add_option("--model", a.model, "Model name or config.json path (random weights from --seed)")->required();
  sub->add_option("--profile", a.profile, "Calibrated hardware profile from `twinserve calibrate` (required)");
  sub->add_option("--loads", a.loads, "Fractions of the predicted capacity, comma-separated (default 0.3,0.6,0.9)");
  add_engine_flags(*sub, a.engine);
  sub->add_option("--seed", a.seed, "Seed for random weights, prompt tokens and sampling")->check(CLI::NonNegativeNumber);
  add_scheduler_flags(*sub, a.sched);
  add_engine_memory_flags(*sub, a.memory);
  sub->add_option("--hw", a.hw, "Hardware profile for the roofline column (default: the engine's device, e.g. h200, cpu)");
  add_output_flags(*sub, a.out, "Output folder (default ./validation)", false);
  add_config_file_flag(*sub, nullptr);
  sub->add_option("--engine-repeats", a.engine_repeats,
                  "Engine runs per load (default 1): the measured figures are each metric's median over the runs, "
                  "and runs 2.. against run 1 show the machine's run-to-run noise")->check(int_range(1, 1000));
  sub->add_flag("--no-plots", a.no_plots, "Do not run gnuplot (the data and plots.gp are still written)");
  sub->add_flag("--quiet", a.quiet, "No progress lines on stderr");
  sub->callback([args] { run(*args); });
}};

}  // namespace
}  // namespace twin::cli
