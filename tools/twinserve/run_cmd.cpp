// twinserve run: a request trace through the real engine (the transformer on
// a backend, scheduled by the same core as the simulator) against the wall
// clock. Writes the simulator's result files, so a run can be replayed and
// diffed. Scheduler flags are the same vLLM names as `simulate`.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "models/speculative_config.hpp"
#include "engine/core/record_stream.hpp"
#include "engine/core/replica.hpp"
#include "engine/runtime/model_config.hpp"
#include "engine/runtime/engine_setup.hpp"
#include "engine/runtime/serve.hpp"
#include "metrics/collector.hpp"
#include "metrics/kv_tier_tally.hpp"
#include "metrics/output_dir.hpp"
#include "metrics/request_csv.hpp"
#include "metrics/result_files.hpp"
#include "metrics/result_sink.hpp"
#include "metrics/slo.hpp"
#include "metrics/step_csv.hpp"
#include "metrics/summary_json.hpp"
#include "metrics/summary_table.hpp"
#include "metrics/vllm_result.hpp"
#include "models/model_desc.hpp"
#include "sim/cluster.hpp"
#include "sim/sources.hpp"
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

void run(const RunArgs& a) {
  if (!a.model && !a.weights) throw UsageError("run needs --model NAME (or --weights DIR holding a config.json)");
  if (!(a.time_scale > 0)) throw UsageError("--time-scale must be positive");
  const std::vector<Slo> slos = parse_slos(a.slo.value_or(""));

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
  const EngineSettings es = engine_settings(setup);
  TraceSource source(a.in.path, trace_read_options(a.in), a.in.max_requests);

  const ResultFileOptions file_options = result_file_options(a.files);
  std::optional<OutputDir> dir;
  std::optional<ResultFiles> csv;
  if (!a.out.dir.empty()) {
    std::vector<std::string> files = csv_result_names(file_options);
    files.push_back("summary.json");
    if (a.result_format == "vllm") files.push_back("vllm_result.json");
    dir.emplace(a.out.dir, a.out.overwrite, files);
  }
  Engine engine(es);  // loads the weights: after every cheap check
  if (const std::string plan = engine.memory_plan_line(); !plan.empty()) std::cerr << plan << "\n";
  std::cerr << "engine: " << engine.description() << "\n";
  ProgressLine progress("run", "requests ended", !a.quiet);
  if (dir) {
    ResultColumns columns;
    columns.speculative = es.speculative.has_value();
    columns.transfer = engine.disaggregated();
    for (const KvTierConfig& t : engine.replica_config().kv.tiers) columns.tiers.push_back(t.name);
    csv.emplace(*dir, file_options, columns);
  }
  MetricsCollector collector(CollectorOptions{CollectorOptions::kDefaultExactRequests, slos});
  std::int64_t ended = 0;
  // The progress line's total, counted beside the run (0 until known, and
  // for a pipe).
  const TraceCount total(a.in.path, trace_read_options(a.in), a.in.max_requests, progress.shown());
  std::map<std::string, std::int64_t> rejected_by_reason;  // the warning names each reason
  ResultSink sink(collector, csv ? csv->requests() : nullptr, csv ? csv->steps() : nullptr, [&](const RequestRecord& r) {
    if (r.outcome == Outcome::rejected) ++rejected_by_reason[r.reason.empty() ? "no reason" : r.reason];
    progress.update(++ended, total.total());
  });

  DriveOptions options;
  options.time_scale = a.time_scale;
  options.asap = a.asap;
  options.token_seed = a.seed;
  const InterruptGuard interrupts;  // the first Ctrl-C stops the run, the records are kept
  options.stop = [] { return InterruptGuard::stop_requested(); };
  const DriveStats stats = engine.serve(source, sink, options);
  progress.finish();

  const ReplicaConfig& rc = engine.replica_config();
  SummaryContext context;
  context.slos = slos;
  context.num_replicas = engine.num_replicas();
  context.kv_blocks_capacity = static_cast<std::int64_t>(rc.kv.num_blocks) * engine.num_replicas();
  context.disaggregated = engine.disaggregated();
  context.simulated_time_s = to_seconds(stats.end_time);
  context.wall_time_s = stats.wall_time_s;
  nlohmann::ordered_json& echo = context.config;
  echo["trace"] = a.in.path;
  if (a.in.max_requests > 0) echo["max_requests"] = a.in.max_requests;
  echo["time_scale"] = a.time_scale;
  echo["asap"] = a.asap;
  const nlohmann::ordered_json settings = engine.config_echo();
  for (const auto& [key, value] : settings.items()) echo[key] = value;
  echo["unserved"] = stats.unserved;
  if (stats.stopped) {
    echo["interrupted"] = true;
    echo["interrupted_requests"] = stats.interrupted;
  }
  Summary summary = collector.summarize(context);
  if (!rc.kv.tiers.empty()) {
    KvTierTally tally;  // the engine's copies run inside its steps: no separate stall
    tally.add(engine.last_kv_stats(), engine.last_tier_stats(), rc.kv.tiers, rc.kv.num_blocks, rc.kv.block_size,
              static_cast<double>(engine.runner().kv_block_bytes()));
    tally.finish(summary, 0.0, false);
  }
  if (dir) {
    csv->close();
    std::ofstream summary_file = dir->open("summary.json");
    write_summary_json(summary_file, summary);
    if (!summary_file) throw Error(a.out.dir + "/summary.json: write failed");
    if (a.result_format == "vllm") {
      std::ofstream vllm_file = dir->open("vllm_result.json");
      write_vllm_result(vllm_file, summary, {"twinserve-run", engine.model().name, vllm_result_date()});
      if (!vllm_file) throw Error(a.out.dir + "/vllm_result.json: write failed");
    }
  }
  const auto& report = source.reader().report();
  if (report.skipped_bad > 0 || report.reordered > 0) {
    std::cerr << "trace: " << report.skipped_bad << " bad rows skipped, " << report.reordered
              << " rows out of order clamped\n";
  }
  if (summary.rejected > 0) {
    // As requests.csv records them (max_model_len, the KV cache, queue full, ...).
    std::cerr << "warning: " << summary.rejected << " requests rejected (max_model_len " << rc.scheduler.max_model_len
              << "):";
    // The most frequent reasons first; a reason may quote its request's
    // numbers, so there can be one per request: three at most.
    std::vector<std::pair<std::int64_t, std::string>> by_count;
    for (const auto& [reason, count] : rejected_by_reason) by_count.emplace_back(-count, reason);
    std::sort(by_count.begin(), by_count.end());
    const char* sep = " ";
    for (std::size_t i = 0; i < by_count.size() && i < 3; ++i) {
      std::cerr << sep << -by_count[i].first << " " << by_count[i].second.substr(0, 100);
      sep = "; ";
    }
    if (by_count.size() > 3) std::cerr << "; " << by_count.size() - 3 << " other reasons";
    std::cerr << " (requests.csv has each)\n";
  }
  if (stats.unserved > 0) std::cerr << "warning: " << stats.unserved << " requests could never be scheduled\n";
  print_summary_table(std::cout, summary);
  print_summary_warnings(std::cerr, summary);
  std::cout << "Ran " << stats.steps << " steps in " << stats.wall_time_s << " s wall\n";
  if (engine.disaggregated()) {
    std::cout << "KV transfers: " << stats.transfers << " of " << stats.handoffs << " hand-offs, "
              << stats.kv_copied_blocks << " blocks of " << engine.runner().kv_block_bytes() << " bytes copied in "
              << to_seconds(stats.kv_copy_time) * 1e3 << " ms";
    if (stats.kv_copied_blocks > 0) {
      std::cout << " (" << to_seconds(stats.kv_copy_time) * 1e6 / static_cast<double>(stats.kv_copied_blocks)
                << " us per block)";
    }
    std::cout << "\n";
  }
  if (!a.out.dir.empty()) std::cout << "Wrote results to " << a.out.dir << "\n";
  if (stats.stopped) {
    throw Interrupted(std::to_string(stats.interrupted) + " requests in flight aborted (reason 'interrupted'), the rest never "
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
