// twinserve sweep: a grid of simulations over cluster-config keys, one row
// per point (docs/plan.md).
#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "metrics/output_dir.hpp"
#include "planner/loaded_trace.hpp"
#include "planner/sweep.hpp"
#include "tools/twinserve/command_registry.hpp"
#include "tools/twinserve/common_flags.hpp"
#include "tools/twinserve/config_file.hpp"
#include "tools/twinserve/flag_checks.hpp"
#include "tools/twinserve/progress_line.hpp"

namespace twin::cli {
namespace {

struct SweepArgs {
  TraceInputFlags in;
  OutputFlags out;
  std::string config_path, slo;
  std::vector<std::string> vary;
  int jobs = 0;
  bool quiet = false;
};

void run_sweep_command(const SweepArgs& a) {
  ClusterConfig base = a.config_path.empty() ? ClusterConfig{} : load_cluster_config(a.config_path);
  if (base.groups.empty()) base.groups.emplace_back();
  if (!a.slo.empty()) base.slos = a.slo;
  std::vector<VaryAxis> axes;
  for (const auto& v : a.vary) axes.push_back(parse_vary(v));
  check_vary_axes(base, axes);
  std::optional<OutputDir> dir;
  if (!a.out.dir.empty()) dir.emplace(a.out.dir, a.out.overwrite, std::vector<std::string>{"sweep.csv"});
  const LoadedTrace trace = load_trace(a.in.path, trace_read_options(a.in));
  SweepOptions options;
  options.max_requests = static_cast<std::size_t>(a.in.max_requests);
  options.jobs = a.jobs;
  ProgressLine progress("sweep", "points", !a.quiet);
  options.progress = [&](std::size_t done, std::size_t total) {
    progress.update(static_cast<std::int64_t>(done), static_cast<std::int64_t>(total));
  };
  const std::vector<SweepPoint> points = run_sweep(base, axes, trace, options);
  progress.finish();
  print_sweep_table(std::cout, axes, points);
  for (const std::string& w : sweep_warnings(axes, points)) std::cerr << "warning: " << w << "\n";
  if (dir) {
    std::ofstream f = dir->open("sweep.csv");
    write_sweep_csv(f, axes, points);
    if (!f) throw Error(a.out.dir + "/sweep.csv: write failed");
    std::cout << "Wrote " << (std::filesystem::path(a.out.dir) / "sweep.csv").string() << "\n";
  }
}

const RegisterCommand registration{"sweep", [](CLI::App& root) {
  auto args = std::make_shared<SweepArgs>();
  auto& a = *args;
  auto* sub = root.add_subcommand("sweep", "Run a grid of simulations over cluster-config keys (what-if studies)");
  add_trace_input_flags(*sub, a.in, "Request trace (any format `trace stats` reads)", true);
  add_config_file_flag(*sub, &a.config_path, "Base cluster config JSON (docs/simulate.md); default: one llama-3.1-8b on h100-80gb");
  sub->add_option("--vary", a.vary, "KEY=V1,V2,... (repeatable: the grid is the cartesian product)")->required();
  sub->add_option("--slo", a.slo, "SLOs (override the config's)");
  add_output_flags(*sub, a.out, "Write sweep.csv here", false);
  sub->add_option("--jobs,-j", a.jobs, "Threads (default: the hardware's)")->check(thread_count());
  sub->add_flag("--quiet", a.quiet, "No progress line on stderr (it shows only on a terminal)");
  sub->callback([args] { run_sweep_command(*args); });
}};

}  // namespace
}  // namespace twin::cli
