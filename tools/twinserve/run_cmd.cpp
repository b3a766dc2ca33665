// twinserve run: a request trace through the real engine (the transformer on
// a backend, scheduled by the same core as the simulator) against the wall
// clock. Writes the simulator's result files, so a run can be replayed and
// diffed. Scheduler flags are the same vLLM names as `simulate`.
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "models/speculative_config.hpp"
#include "engine/core/replica.hpp"
#include "engine/runtime/model_config.hpp"
#include "engine/runtime/engine_run.hpp"
#include "engine/runtime/engine_setup.hpp"
#include "metrics/slo.hpp"
#include "metrics/summary_table.hpp"
#include "models/model_desc.hpp"
#include "sim/cluster.hpp"
#include "sim/sources.hpp"
#include "tools/twinserve/client_flags.hpp"
#include "tools/twinserve/command_registry.hpp"
#include "tools/twinserve/flag_registry.hpp"
#include "tools/twinserve/common_flags.hpp"
#include "tools/twinserve/engine_setup_flags.hpp"
#include "tools/twinserve/config_file.hpp"
#include "tools/twinserve/disagg_flags.hpp"
#include "tools/twinserve/flag_checks.hpp"
#include "tools/twinserve/interrupt_guard.hpp"
#include "tools/twinserve/progress_line.hpp"
#include "tools/twinserve/trace_count.hpp"
#include "tools/twinserve/scheduler_flags.hpp"
#include "traces/trace_reader.hpp"

namespace twin::cli {
namespace {

struct RunArgs {
  TraceInputFlags in;
  OutputFlags out;
  EngineFlags engine;
  EngineMemoryFlags memory;
  std::optional<std::string> model, weights, slo;
  double time_scale = 1.0;
  bool asap = false;
  std::uint64_t seed = 0;
  float temperature = 0.0f, top_p = 1.0f;
  std::int32_t top_k = 0;
  std::optional<std::int32_t> eos_token;
  SchedulerFlags sched;
  ResultFileFlags files;
  bool quiet = false;
  std::string result_format = "twin";
  std::string speculative_config;  // vLLM's --speculative-config JSON
  DisaggFlags disagg;              // prefill and decode replicas in the process (docs/disaggregation.md)
  ClientFlags clients;             // how the trace's requests are sent, as simulate sends them
};

// The pools the disaggregation flags ask for, parsed as `simulate` parses
// them: the roles in replica order (prefill first) and the loop's options.
void set_pools(const DisaggFlags& flags, EngineSetup& setup) {
  ClusterConfig c;
  c.groups.emplace_back();
  apply_disagg_flags(flags, c, false);
  if (!has_pools(c)) return;
  if (c.disaggregation.kv_transfer != "whole") {
    throw UsageError("--kv-transfer " + c.disaggregation.kv_transfer +
                     ": the engine moves a request's KV whole, after its prefill (layerwise is the simulator's)");
  }
  for (const ReplicaGroupConfig& g : c.groups) {
    setup.roles.insert(setup.roles.end(), static_cast<std::size_t>(g.count), replica_role(g.role));
  }
  setup.disagg = disagg_options(c.disaggregation, "round_robin");
}

EngineSetup engine_setup(const RunArgs& a) {
  EngineSetup setup = engine_setup_from_flags(a.model.value_or(""), a.sched, a.engine, a.memory, a.seed);
  setup.runner.weights_dir = a.weights.value_or("");
  setup.sampling.temperature = a.temperature;
  setup.sampling.top_k = a.top_k;
  setup.sampling.top_p = a.top_p;
  setup.sampling.seed = a.seed;
  setup.sampling.eos_token = a.eos_token.value_or(-1);
  if (!a.speculative_config.empty()) {
    setup.speculative = parse_speculative_config(a.speculative_config, "--speculative-config");
  }
  set_pools(a.disagg, setup);
  return setup;
}

// The rejections as requests.csv records them (max_model_len, the KV cache,
// queue full, ...): the most frequent reasons, three at most.
void warn_rejections(const EngineRunResult& r, std::int32_t max_model_len) {
  if (r.summary.rejected <= 0) return;
  std::cerr << "warning: " << r.summary.rejected << " requests rejected (max_model_len " << max_model_len << "):";
  const char* sep = " ";
  for (std::size_t i = 0; i < r.rejections.size() && i < 3; ++i) {
    std::cerr << sep << r.rejections[i].second << " " << r.rejections[i].first.substr(0, 100);
    sep = "; ";
  }
  if (r.rejections.size() > 3) std::cerr << "; " << r.rejections.size() - 3 << " other reasons";
  if (r.other_rejections > 0) std::cerr << "; " << r.other_rejections << " more with other reasons";
  std::cerr << " (requests.csv has each)\n";
}

void print_transfers(const DriveStats& stats, std::int64_t block_bytes) {
  std::cout << "KV transfers: " << stats.transfers << " of " << stats.handoffs << " hand-offs, "
            << stats.kv_copied_blocks << " blocks of " << block_bytes << " bytes copied in "
            << to_seconds(stats.kv_copy_time) * 1e3 << " ms";
  if (stats.kv_copied_blocks > 0) {
    std::cout << " (" << to_seconds(stats.kv_copy_time) * 1e6 / static_cast<double>(stats.kv_copied_blocks)
              << " us per block)";
  }
  std::cout << "\n";
}

void run(const RunArgs& a) {
  if (!a.model && !a.weights) throw UsageError("run needs --model NAME (or --weights DIR holding a config.json)");
  if (!(a.time_scale > 0)) throw UsageError("--time-scale must be positive");
  EngineRunOptions o;
  o.slos = parse_slos(a.slo.value_or(""));
  o.time_scale = a.time_scale;
  o.asap = a.asap;
  o.clients = client_options(a.clients);
  o.token_seed = a.seed;
  o.files = {a.out.dir, a.out.overwrite, result_file_options(a.files), a.result_format == "vllm"};
  // The setup settled against the model (a bad flag or model fails here,
  // before the trace is opened).
  const EngineSettings settings = engine_settings(engine_setup(a));
  TraceSource source(a.in.path, trace_read_options(a.in), a.in.max_requests);
  nlohmann::ordered_json echo;
  echo["trace"] = a.in.path;
  if (a.in.max_requests > 0) echo["max_requests"] = a.in.max_requests;
  echo["time_scale"] = a.time_scale;
  echo["asap"] = a.asap;
  echo_client_options(a.clients, echo);

  ProgressLine progress("run", "requests ended", !a.quiet);
  // The progress line's total, counted beside the run (0 until known, and
  // for a pipe).
  const TraceCount total(a.in.path, trace_read_options(a.in), a.in.max_requests, progress.shown());
  std::int64_t ended = 0;
  o.on_request = [&](const RequestRecord&) { progress.update(++ended, total.total()); };
  // The first Ctrl-C stops the run and the records are kept; installed once
  // the weights are loaded, just before serving (until then it ends the
  // process, as before any command's work).
  std::optional<InterruptGuard> interrupts;
  o.stop = [] { return InterruptGuard::stop_requested(); };
  std::int32_t max_model_len = 0;
  std::int64_t block_bytes = 0;
  bool disaggregated = false;
  const EngineRunResult r = run_engine(settings, source, o, echo, [&](const Engine& engine) {
    if (const std::string plan = engine.memory_plan_line(); !plan.empty()) std::cerr << plan << "\n";
    std::cerr << "engine: " << engine.description() << "\n";
    interrupts.emplace();
    max_model_len = engine.replica_config().scheduler.max_model_len;
    block_bytes = engine.runner().kv_block_bytes();
    disaggregated = engine.disaggregated();
  });
  progress.finish();

  const auto& report = source.reader().report();
  if (report.skipped_bad > 0 || report.reordered > 0) {
    std::cerr << "trace: " << report.skipped_bad << " bad rows skipped, " << report.reordered
              << " rows out of order clamped\n";
  }
  warn_rejections(r, max_model_len);
  if (r.stats.unserved > 0) std::cerr << "warning: " << r.stats.unserved << " requests could never be scheduled\n";
  print_summary_table(std::cout, r.summary);
  print_summary_warnings(std::cerr, r.summary);
  std::cout << "Ran " << r.stats.steps << " steps in " << r.stats.wall_time_s << " s wall\n";
  if (disaggregated) print_transfers(r.stats, block_bytes);
  if (!a.out.dir.empty()) std::cout << "Wrote results to " << a.out.dir << "\n";
  if (r.stats.stopped) {
    throw Interrupted(std::to_string(r.stats.interrupted) + " requests in flight aborted (reason 'interrupted'), the rest never "
                "submitted; the records so far are written" + (a.out.dir.empty() ? "" : " to " + a.out.dir));
  }
}

const RegisterCommand registration{"run", [](CLI::App& root) {
  auto args = std::make_shared<RunArgs>();
  auto* sub = root.add_subcommand("run", "Serve a request trace on the real engine against the wall clock");
  auto& a = *args;
  add_trace_input_flags(*sub, a.in, "Request trace (any format `trace stats` reads)", true);
  add_flag(*sub, FlagId::model, a.model, "default: --weights' config.json");
  add_flag(*sub, FlagId::weights, a.weights);
  // The layout and hardware flags of simulate/serve --simulate: the engine
  // has none of them, so it says why instead of "not expected".
  refuse_flag(*sub, FlagId::hardware, "the engine runs on this machine's --backend; `simulate --hw` prices other hardware");
  refuse_flag(*sub, FlagId::tensor_parallel, "the engine runs one device; `simulate -tp N` simulates tensor parallelism");
  refuse_flag(*sub, FlagId::pipeline_parallel, "the engine runs one device; `simulate -pp N` simulates pipelines");
  add_engine_flags(*sub, a.engine);
  sub->add_option("--time-scale", a.time_scale, "Replay arrivals K times faster than the trace")->check(real_range(1e-3, 1e6));
  add_switch(*sub, FlagId::asap, a.asap);
  add_client_flags(*sub, a.clients);
  add_flag(*sub, FlagId::seed, a.seed, "here random weights, prompt tokens and sampling");
  sub->add_option("--temperature", a.temperature, "Sampling temperature (0: greedy)")->check(real_range(0, 100));
  sub->add_option("--top-k", a.top_k, "Top-k cut (0: none)")->check(int_range(0, kMaxInt32));
  sub->add_option("--top-p", a.top_p, "Nucleus cut (1: none)")->check(real_range(0, 1, true));
  add_flag(*sub, FlagId::eos_token, a.eos_token);
  add_flag(*sub, FlagId::slo, a.slo);
  add_scheduler_flags(*sub, a.sched);
  add_engine_memory_flags(*sub, a.memory);
  add_kv_offload_flags(*sub, a.memory);
  add_output_flags(*sub, a.out, "Write requests.csv, steps.csv and summary.json here", false);
  add_disagg_flags(*sub, a.disagg);
  add_config_file_flag(*sub, nullptr);
  add_result_file_flags(*sub, a.files);
  add_switch(*sub, FlagId::quiet, a.quiet);
  add_flag(*sub, FlagId::result_format, a.result_format);
  add_flag(*sub, FlagId::speculative_config, a.speculative_config,
           "the engine: method ngram or draft_model (with model, prompt_lookup_max); greedy only");
  sub->callback([args] { run(*args); });
}};

}  // namespace
}  // namespace twin::cli
