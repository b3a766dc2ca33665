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
#include "tools/twinserve/client_flags.hpp"
#include "tools/twinserve/command_registry.hpp"
#include "tools/twinserve/interrupt_guard.hpp"
#include "tools/twinserve/common_flags.hpp"
#include "tools/twinserve/config_file.hpp"
#include "tools/twinserve/flag_checks.hpp"
#include "tools/twinserve/flag_registry.hpp"
#include "tools/twinserve/progress_line.hpp"

namespace twin::cli {
namespace {

struct SweepArgs {
  TraceInputFlags in;
  OutputFlags out;
  std::string config_path, slo;
  std::vector<std::string> vary;
  // Axes by their flags' names, the --vary keys they stand for.
  std::vector<std::int32_t> max_concurrency, tp, dp;
  ClientFlags clients;  // --request-rate, --sessions, --think-time-s: every point's
  int jobs = 0;
  bool quiet = false;
};

void run_sweep_command(const SweepArgs& a) {
  ClusterConfig base = a.config_path.empty() ? ClusterConfig{} : load_cluster_config(a.config_path);
  if (base.groups.empty()) base.groups.emplace_back();
  if (!a.slo.empty()) base.slos = a.slo;
  std::vector<VaryAxis> axes;
  for (const auto& v : a.vary) axes.push_back(parse_vary(v));
  auto flag_axis = [&](const char* key, const std::vector<std::int32_t>& values) {
    if (values.empty()) return;
    VaryAxis axis{key, {}};
    for (std::int32_t v : values) axis.values.push_back(std::to_string(v));
    axes.push_back(std::move(axis));
  };
  flag_axis("tp", a.tp);
  flag_axis("dp", a.dp);
  flag_axis("max_concurrency", a.max_concurrency);
  check_vary_axes(base, axes);
  std::optional<OutputDir> dir;
  if (!a.out.dir.empty()) dir.emplace(a.out.dir, a.out.overwrite, std::vector<std::string>{"sweep.csv"});
  const LoadedTrace trace = load_trace(a.in.path, trace_read_options(a.in));
  SweepOptions options;
  options.max_requests = static_cast<std::size_t>(a.in.max_requests);
  options.jobs = a.jobs;
  options.clients = client_options(a.clients);
  ProgressLine progress("sweep", "points", !a.quiet);
  options.progress = [&](std::size_t done, std::size_t total) {
    progress.update(static_cast<std::int64_t>(done), static_cast<std::int64_t>(total));
  };
  // The first Ctrl-C or SIGTERM starts no further point and stops those
  // running (left out: part of a trace is no figure); the rows finished
  // are printed and written as for a whole sweep.
  const InterruptGuard interrupts;
  options.stop = [] { return InterruptGuard::stop_requested(); };
  options.stop_running = [] { return InterruptGuard::received() != 0; };
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
  if (const std::size_t total = grid_size(axes); points.size() < total) {
    throw Interrupted(std::to_string(points.size()) + " of " + std::to_string(total) + " points finished" +
                      (dir ? "; sweep.csv has those rows" : ""));
  }
}

const RegisterCommand registration{"sweep", [](CLI::App& root) {
  auto args = std::make_shared<SweepArgs>();
  auto& a = *args;
  auto* sub = root.add_subcommand("sweep", "Run a grid of simulations over cluster-config keys (what-if studies)");
  add_trace_input_flags(*sub, a.in, "Request trace (any format `trace stats` reads)", true);
  add_config_file_flag(*sub, &a.config_path, "Base cluster config JSON (docs/simulate.md); default: one llama-3.1-8b on h100-80gb");
  sub->add_option("--vary", a.vary,
                  "KEY=V1,V2,... (repeatable: the grid is the cartesian product; the list flags below add axes too)");
  add_flag(*sub, FlagId::tensor_parallel, a.tp, "a list: the axis tp")->delimiter(',');
  add_flag(*sub, FlagId::data_parallel, a.dp, "a list: the axis dp")->delimiter(',');
  add_flag(*sub, FlagId::max_concurrency, a.max_concurrency,
           "a list: the axis max_concurrency, e.g. 1,4,16,64 with --request-rate inf for the throughput-latency curve")
      ->delimiter(',');
  add_client_mode_flags(*sub, a.clients);
  refuse_flag(*sub, FlagId::model, "sweep's cluster comes from --config; --vary model=A,B varies it");
  refuse_flag(*sub, FlagId::hardware, "sweep's cluster comes from --config; --vary hardware=A,B varies it");
  add_flag(*sub, FlagId::slo, a.slo, "override the config's");
  add_output_flags(*sub, a.out, "Write sweep.csv here", false);
  add_flag(*sub, FlagId::jobs, a.jobs, "default: the hardware's")->check(thread_count());
  add_switch(*sub, FlagId::quiet, a.quiet);
  sub->callback([args] { run_sweep_command(*args); });
}};

}  // namespace
}  // namespace twin::cli
