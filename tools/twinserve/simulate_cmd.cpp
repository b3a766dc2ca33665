// twinserve simulate: a trace through a simulated cluster. Flags follow
// vLLM's names where vLLM has the knob (and --config FILE.yaml holds them as
// vLLM's does); a cluster config JSON describes heterogeneous clusters and
// the flags override it.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "models/speculative_config.hpp"
#include "engine/core/disaggregation.hpp"
#include "engine/core/router.hpp"
#include "metrics/summary_table.hpp"
#include "planner/mpi_split.hpp"
#include "sim/calibrated_cost_model.hpp"
#include "sim/cluster.hpp"
#include "sim/cluster_config.hpp"
#include "sim/data_parallel.hpp"
#include "sim/explain_ops.hpp"
#include "sim/rank_group.hpp"
#include "sim/run.hpp"
#include "sim/sources.hpp"
#include "tools/twinserve/capture.hpp"
#include "tools/twinserve/interrupt_guard.hpp"
#include "tools/twinserve/client_flags.hpp"
#include "tools/twinserve/command_registry.hpp"
#include "tools/twinserve/common_flags.hpp"
#include "tools/twinserve/config_file.hpp"
#include "tools/twinserve/disagg_flags.hpp"
#include "tools/twinserve/flag_checks.hpp"
#include "tools/twinserve/flag_registry.hpp"
#include "tools/twinserve/mpi_command.hpp"
#include "tools/twinserve/progress_line.hpp"
#include "tools/twinserve/scheduler_flags.hpp"
#include "tools/twinserve/trace_count.hpp"

namespace twin::cli {
namespace {

struct SimulateArgs {
  TraceInputFlags in;
  ClientFlags clients;  // how the trace's requests are sent
  OutputFlags out;
  std::string config_path;
  std::optional<std::string> model, hardware, dtype, kv_dtype, quantization, router, slo, replay;
  std::optional<std::string> profile;  // calibrated profile (twinserve calibrate)
  std::optional<std::int32_t> tp, pp, replicas, num_gpu_blocks_override;
  std::optional<std::string> max_model_len;  // a number, or vLLM's "auto" / -1
  std::optional<std::int32_t> ep;              // expert parallel ranks (MoE)
  std::optional<double> expert_busiest_share;  // the busiest EP rank's share of the routed tokens
  std::optional<std::int32_t> dp;              // vLLM's --data-parallel-size
  bool enable_expert_parallel = false;
  DisaggFlags disagg;  // prefill/decode disaggregation (docs/disaggregation.md)
  std::optional<std::string> replay_transfers;  // an engine run's requests.csv
  std::optional<double> gpu_memory_utilization;
  // Router refresh period, s (docs/simulate.md, "Router refresh"), and the
  // threads that advance the replicas between refreshes.
  std::optional<double> router_refresh_s;
  int jobs = 1;
  // KV tiers below HBM (docs/simulate.md, "KV tiers"): GiB per replica.
  std::optional<double> kv_offload_dram_gib, kv_offload_ssd_gib;
  bool kv_offload_overlap = false;
  std::optional<std::uint64_t> seed;
  SchedulerFlags sched;
  ResultFileFlags files;
  std::string percentiles = "auto";  // --percentiles
  bool no_progress = false, explain_memory = false;
  std::string result_format = "twin";
  double energy_price = 0, carbon_intensity = 0;  // issue 44: $/kWh, g/kWh
  std::string explain_ops;  // step shapes to price op by op, then exit
  std::string speculative_config;  // vLLM's --speculative-config JSON plus the acceptance keys
};

ClusterConfig make_config(const SimulateArgs& a) {
  ClusterConfig c = a.config_path.empty() ? ClusterConfig{} : load_cluster_config(a.config_path);
  if (c.groups.empty()) c.groups.emplace_back();
  for (auto& g : c.groups) {
    if (a.model) g.model = *a.model;
    if (a.hardware) g.hardware = *a.hardware;
    if (a.dtype) g.dtype = *a.dtype;
    if (a.kv_dtype) g.kv_dtype = *a.kv_dtype;
    if (a.quantization) g.quantization = *a.quantization;
    if (a.tp) g.tp = *a.tp;
    if (a.pp) g.pp = *a.pp;
    if (a.ep) g.ep = *a.ep;
    if (a.expert_busiest_share) g.expert_busiest_share = *a.expert_busiest_share;
    if (a.dp) g.dp = *a.dp;
    if (a.enable_expert_parallel) g.enable_expert_parallel = true;
    if (a.replay) g.replay = *a.replay;
    if (a.profile) g.profile = *a.profile;
    if (!a.speculative_config.empty()) g.speculative = parse_speculative_config(a.speculative_config, "--speculative-config");
  }
  if (a.replicas) {
    if (c.groups.size() != 1) throw UsageError("--replicas applies to a single-group cluster; set count per group in the cluster config");
    c.groups.front().count = *a.replicas;
  }
  apply_disagg_flags(a.disagg, c, a.replicas.has_value());
  if (a.replay_transfers) {
    if (!has_pools(c)) throw UsageError("--replay-transfers needs prefill and decode pools (--prefill-replicas/--decode-replicas, or groups with a role)");
    c.disaggregation.replay = *a.replay_transfers;
  }
  if (a.sched.preset) c.scheduler_preset = *a.sched.preset;
  if (a.router) {
    c.router = *a.router;
    c.router_given = true;
  }
  // A DP instance runs under vLLM's coordinator: the summary echoes it.
  c.router = data_parallel_router(c);
  if (a.router_refresh_s) {
    check_router_refresh(*a.router_refresh_s, "--router-refresh-s");
    c.router_refresh_s = *a.router_refresh_s;
  }
  if (a.slo) c.slos = *a.slo;
  if (a.seed) c.seed = *a.seed;
  if (a.gpu_memory_utilization) {
    c.gpu_memory_utilization = *a.gpu_memory_utilization;
    for (auto& g : c.groups) g.gpu_memory_utilization = 0;
  }
  if (a.num_gpu_blocks_override) {
    c.num_gpu_blocks_override = *a.num_gpu_blocks_override;
    for (auto& g : c.groups) g.num_gpu_blocks_override = -1;
  }
  c.overrides = scheduler_overrides(a.sched);
  c.overrides.max_model_len = max_model_len_number(a.max_model_len);
  if (a.max_model_len) c.max_model_len_auto = max_model_len_is_auto(a.max_model_len);
  // A size flag sets that tier's capacity (added in DRAM-then-SSD order if
  // the config lacks it); 0 removes it.
  auto set_tier = [&](const char* name, const std::optional<double>& gib) {
    if (!gib) return;
    auto it = std::find_if(c.kv_tiers.begin(), c.kv_tiers.end(), [&](const KvTierSpec& t) { return t.name == name; });
    if (*gib <= 0) {
      if (it != c.kv_tiers.end()) c.kv_tiers.erase(it);
      return;
    }
    if (it == c.kv_tiers.end()) {
      KvTierSpec t;
      t.name = name;
      // DRAM goes first, above any other tier; SSD last.
      it = std::string(name) == "dram" ? c.kv_tiers.insert(c.kv_tiers.begin(), t) : c.kv_tiers.insert(c.kv_tiers.end(), t);
    }
    it->capacity_gib = *gib;
    it->capacity_blocks = 0;
  };
  set_tier("dram", a.kv_offload_dram_gib);
  set_tier("ssd", a.kv_offload_ssd_gib);
  if (a.kv_offload_overlap) {
    if (c.kv_tiers.empty()) throw UsageError("--kv-offload-overlap needs KV tiers (--kv-offload-dram-gib, --kv-offload-ssd-gib or kv_tiers)");
    c.kv_tier_load_overlap = true;
  }
  return c;
}

// The memory plan of every group, term by term, as vLLM's startup log
// gives it; nothing is simulated.
void explain_memory(const ClusterConfig& config) {
  // The plan is printed whatever vLLM's start-up check says; a refusal is
  // then the command's error (exit 1), as vLLM's start would fail.
  const Cluster cluster = build_cluster(config, StartUpCheck::report);
  for (std::size_t i = 0; i < cluster.groups.size(); ++i) {
    const GroupPlan& g = cluster.groups[i];
    const SchedulerConfig& s = g.replica.scheduler;
    std::cout << "group " << i << ": " << g.model.name << " (" << dtype_name(g.dtype)
              << (g.precision.quantized() ? ", " + std::string(quant_method_name(g.precision.quant.method)) : std::string())
              << ", KV "
              << dtype_name(g.kv_dtype) << ") on " << g.hardware.name << " (" << g.hardware.memory_reported
              << "), tp=" << g.layout.tp << " pp=" << g.layout.pp
              << (g.layout.ep > 1 ? " ep=" + std::to_string(g.layout.ep) : std::string())
              << (g.config.dp > 1 ? " dp=" + std::to_string(g.config.dp) + " (per rank:)" : std::string())
              << ", preset " << s.preset << ", max_num_batched_tokens " << effective_token_budget(s) << ", max_num_seqs " << s.max_num_seqs
              << ", max_model_len " << s.max_model_len << ", block size " << g.replica.kv.block_size
              << "\nper GPU (the fullest stage):\n";
    std::cout << explain_memory_plan(g.memory, "  ");
    std::cout << "  tokens in the cache: " << static_cast<std::int64_t>(g.memory.num_blocks) * g.replica.kv.block_size
              << "\n";
  }
  std::cout.flush();
  (void)build_cluster(config);  // throws vLLM's refusal where a group's check failed
}

// The MPI ranks of `mpirun -n K twinserve simulate ...` as the simulator sees them.
class MpiRanks final : public RankGroup {
 public:
  explicit MpiRanks(const MpiSession& mpi) : mpi_(mpi) {}
  int rank() const override { return mpi_.rank(); }
  int size() const override { return mpi_.size(); }
  std::vector<std::string> all_gather(const std::string& mine) override { return mpi_.all_gather(mine); }

 private:
  const MpiSession& mpi_;
};

// --explain-memory or --explain-ops: prints and says so; nothing is simulated.
bool explain(const SimulateArgs& a, const ClusterConfig& config) {
  if (a.explain_memory) {
    explain_memory(config);
    return true;
  }
  if (!a.explain_ops.empty()) {
    Cluster cluster = build_cluster(config);
    std::cout << explain_ops(cluster, a.explain_ops);
    return true;
  }
  return false;
}

// Where the run's records go. Under mpirun every rank simulates its share
// of the replicas; rank 0 gets every record and alone writes and prints.
RunOutputs run_outputs(const SimulateArgs& a, const ResultFileOptions& files, const MpiSession& mpi,
                       MpiRanks& ranks) {
  const bool root = mpi.rank() == 0;
  RunOutputs outputs;
  if (mpi.active() && mpi.size() > 1) outputs.ranks = &ranks;
  outputs.out_dir = root ? a.out.dir : std::string();
  outputs.steps_for_root = !root && !a.out.dir.empty() && !files.steps.none();
  outputs.overwrite = a.out.overwrite;
  outputs.jobs = a.jobs;
  outputs.files = files;
  outputs.exact_percentile_requests = a.percentiles == "exact"       ? CollectorOptions::kAlwaysExact
                                      : a.percentiles == "histogram" ? 0
                                                                     : CollectorOptions::kDefaultExactRequests;
  outputs.vllm_result = a.result_format == "vllm";
  outputs.energy_price_per_kwh = a.energy_price;
  outputs.carbon_g_per_kwh = a.carbon_intensity;
  return outputs;
}

// The trace and client flags, echoed in summary.json.
nlohmann::ordered_json trace_echo(const SimulateArgs& a) {
  nlohmann::ordered_json extra;
  extra["trace"] = a.in.path;
  if (a.in.max_requests > 0) extra["max_requests"] = a.in.max_requests;
  if (a.in.rate > 0) {
    extra["rate"] = a.in.rate;
    extra["arrival_seed"] = a.in.arrival_seed;
  }
  echo_client_options(a.clients, extra);
  return extra;
}

// What the run leaves to say besides the summary: extrapolated lookups,
// skipped trace rows, short session turns, unserved requests.
std::vector<std::string> run_notes(std::int64_t outside, TraceSource& source, Clients& clients,
                                   const RunResult& result) {
  std::vector<std::string> notes;
  if (outside > 0) {
    notes.push_back("calibrated cost model: " + std::to_string(outside) +
                    " op lookups beyond the profile's tables (extrapolated along the roofline)");
  }
  const auto& report = source.reader().report();
  if (report.skipped_bad > 0 || report.skipped_failed > 0 || report.reordered > 0) {
    notes.push_back("trace: " + std::to_string(report.skipped_bad) + " bad rows skipped, " +
                    std::to_string(report.skipped_failed) + " failed requests skipped, " +
                    std::to_string(report.reordered) + " rows out of order clamped");
  }
  if (const std::int64_t short_turns = clients.report().short_turn_prompts; short_turns > 0) {
    notes.push_back("sessions: " + std::to_string(short_turns) +
                    " turns' trace prompts were shorter than the conversation so far; each was taken as the new user "
                    "message alone");
  }
  if (result.stats.unserved > 0) {
    notes.push_back("warning: " + std::to_string(result.stats.unserved) +
                    " requests could never be scheduled and were aborted at the end of the run");
  }
  return notes;
}

// The notes, the summary table and, for an interrupted run, its error.
void report_run(const SimulateArgs& a, const RunResult& result, const std::vector<std::string>& notes) {
  for (const std::string& n : notes) std::cerr << n << "\n";
  print_summary_table(std::cout, result.summary);
  print_summary_warnings(std::cerr, result.summary);
  std::cout << "Simulated " << result.stats.steps << " steps, " << result.summary.simulated_time_s << " s virtual in "
            << result.wall_time_s << " s wall\n";
  if (!a.out.dir.empty()) std::cout << "Wrote results to " << a.out.dir << "\n";
  if (!result.stats.stopped && InterruptGuard::received() != 0) {  // after the MPI ranks' last refresh
    throw Interrupted("the signal came after the last arrival; the run ended whole, its files complete");
  }
  if (result.stats.stopped) {
    throw Interrupted(std::to_string(result.stats.interrupted) +
                      " requests in flight ended as 'interrupted', the rest of the trace never arrived; the records "
                      "so far are written" + (a.out.dir.empty() ? "" : " to " + a.out.dir));
  }
}

void run(const SimulateArgs& a, const MpiSession& mpi) {
  const ResultFileOptions files = result_file_options(a.files);  // a usage error before any work
  const ClusterConfig config = make_config(a);
  if (explain(a, config)) return;
  if (a.in.path.empty()) throw UsageError("simulate needs --trace (or --explain-memory / --explain-ops)");
  TraceSource source(a.in.path, trace_read_options(a.in), a.in.max_requests);
  Clients clients(source, client_options(a.clients));
  const bool root = mpi.rank() == 0;
  MpiRanks ranks(mpi);
  RunOutputs outputs = run_outputs(a, files, mpi, ranks);
  SimulateCapture* capture = simulate_capture();
  // Requests ended of the trace's total (counted beside the run), the rate
  // and the ETA, with the virtual clock: only on a terminal.
  ProgressLine progress("simulate", "requests", !a.no_progress && root && !capture);
  const TraceCount total(a.in.path, trace_read_options(a.in), a.in.max_requests, progress.shown());
  char note[48];
  if (progress.shown()) {
    outputs.progress = [&](const SimProgress& p) {
      std::snprintf(note, sizeof note, "virtual %.0f s", p.virtual_s);
      progress.update(p.ended, total.total(), note);
    };
  }
  const nlohmann::ordered_json extra = trace_echo(a);
  const std::int64_t outside_before = CalibratedCostModel::out_of_range_total();
  if (capture && capture->prepare) capture->prepare(outputs);
  // The first Ctrl-C or SIGTERM stops the run at the loop's next turn (a
  // windowed run, threads or MPI ranks: at the next router refresh, every
  // rank at the same one), with every file written whole (run's mechanism).
  std::optional<InterruptGuard> interrupts;
  if (!capture) {  // Python: its own KeyboardInterrupt
    interrupts.emplace();
    outputs.stop = [] { return InterruptGuard::stop_requested(); };
  }
  RunResult result = run_simulation(config, clients.source(), outputs, extra);
  progress.finish();
  if (!root) return;
  std::vector<std::string> notes =
      run_notes(CalibratedCostModel::out_of_range_total() - outside_before, source, clients, result);
  if (capture) {
    capture->notes = std::move(notes);
    capture->result = std::move(result);
    capture->done = true;
    return;
  }
  report_run(a, result, notes);
}

// How a replica is laid out and how arrivals reach the replicas.
void add_layout_flags(CLI::App& app, SimulateArgs& a) {
  CLI::App* sub = &app;
  add_flag(*sub, FlagId::tensor_parallel, a.tp);
  add_flag(*sub, FlagId::pipeline_parallel, a.pp);
  sub->add_option("--replicas", a.replicas, "Data-parallel replicas (default 1)")->check(int_range(1, 1000000));
  add_flag(*sub, FlagId::data_parallel, a.dp, "router dp_balance");
  add_switch(*sub, FlagId::enable_expert_parallel, a.enable_expert_parallel);
  add_flag(*sub, FlagId::router, a.router);
  sub->add_option("--router-refresh-s", a.router_refresh_s,
                  "Seconds between refreshes of the router's view of the replicas (cluster key router_refresh_s): "
                  "0 (default) routes on every replica's state at each arrival; > 0 on the state at the last "
                  "refresh plus the router's own count of what it sent since, as production routers do, and lets "
                  "the replicas advance apart in between (--jobs; mpirun -n K twinserve simulate spreads them over ranks)");
  add_flag(*sub, FlagId::jobs, a.jobs,
           "advancing the replicas between router refreshes (needs --router-refresh-s > 0); the result files are "
           "the same bytes for any number (default 1)")
      ->check(core_thread_count());
  add_flag(*sub, FlagId::expert_parallel, a.ep, "all-to-all dispatch and combine");
  sub->add_option("--expert-busiest-share", a.expert_busiest_share,
                  "With --ep: the share of routed tokens the busiest rank's experts get, from 1/ep (uniform, the "
                  "default) to 1 (skewed routing)")
      ->check(real_range(0, 1, true));
}

const RegisterCommand registration{"simulate", [](CLI::App& root) {
  auto args = std::make_shared<SimulateArgs>();
  auto* sub = root.add_subcommand("simulate", "Run a request trace through a simulated serving cluster");
  auto& a = *args;
  add_trace_input_flags(*sub, a.in, "Request trace (any format `trace stats` reads)", false);
  add_trace_arrival_flags(*sub, a.in);
  add_client_flags(*sub, a.clients);
  sub->add_flag("--explain-memory", a.explain_memory, "Print each group's KV memory plan term by term and exit");
  sub->add_option("--explain-ops", a.explain_ops,
                  "Price step shapes op by op and exit: 'P' a prompt of P tokens, 'BxC' B decodes after C cached tokens, "
                  "parts joined by '+' in one step, steps comma-separated (e.g. 512,64x1024,1920+128x1024); names the "
                  "efficiency curve of each op")
      ->check(non_empty());
  add_config_file_flag(*sub, &a.config_path, "Cluster config JSON (see docs/simulate.md); the flags override it");
  add_flag(*sub, FlagId::model, a.model, "default llama-3.1-8b");
  add_flag(*sub, FlagId::hardware, a.hardware, "default h100-80gb");
  add_flag(*sub, FlagId::dtype, a.dtype,
           "fp8 (fp8_e4m3, fp8_e5m2) and int8 mean --quantization fp8 / int8_w8a8");
  add_flag(*sub, FlagId::kv_cache_dtype, a.kv_dtype, "auto or unset: 16-bit as the weights (fp32 weights: fp32)");
  add_flag(*sub, FlagId::quantization, a.quantization,
           "fp8 (W8A8 on fp8 tensor cores, else weight-only), awq, gptq (4-bit weight-only, groups of 128), "
           "int8_w8a8, int8 (8-bit weight-only), nvfp4 / modelopt_fp4 (W4A4 on fp4 tensor cores, else "
           "weight-only), mxfp4 (MoE experts, weight-only); unset: the checkpoint's quantization_config");
  add_layout_flags(*sub, a);
  add_disagg_flags(*sub, a.disagg);
  sub->add_option("--replay-transfers", a.replay_transfers,
                  "With --replay and pools: an engine run's requests.csv; each KV transfer lasts what it measured "
                  "(docs/disaggregation.md)");
  add_flag(*sub, FlagId::slo, a.slo);
  add_flag(*sub, FlagId::seed, a.seed, "here the router's");
  add_scheduler_flags(*sub, a.sched);
  add_flag(*sub, FlagId::max_model_len, a.max_model_len, "per replica");
  add_flag(*sub, FlagId::gpu_memory_utilization, a.gpu_memory_utilization);
  add_flag(*sub, FlagId::num_gpu_blocks_override, a.num_gpu_blocks_override);
  add_flag(*sub, FlagId::kv_offload_dram_gib, a.kv_offload_dram_gib, "LMCache's / vLLM's CPU offloading; docs/simulate.md");
  add_flag(*sub, FlagId::kv_offload_ssd_gib, a.kv_offload_ssd_gib);
  sub->add_flag("--kv-offload-overlap", a.kv_offload_overlap,
                "Loads from the KV tiers overlap the step's compute (layer by layer) instead of delaying it");
  add_flag(*sub, FlagId::profile, a.profile, "the cost model");
  sub->add_option("--replay", a.replay, "Cost model: replay an engine run's steps.csv (replay parity; see docs/simulate.md)");
  add_output_flags(*sub, a.out, "Write requests.csv, steps.csv and summary.json here", false);
  add_result_file_flags(*sub, a.files);
  sub->add_option("--percentiles", a.percentiles,
                  "TTFT/TPOT/E2EL percentiles: auto (default: exact up to 4,194,304 completed requests, then "
                  "histograms), exact (every value kept: memory grows with the requests) or histogram (flat memory, "
                  "each percentile within 0.39%); docs/outputs.md")
      ->check(CLI::IsMember({"auto", "exact", "histogram"}));
  add_flag(*sub, FlagId::result_format, a.result_format);
  add_flag(*sub, FlagId::energy_price, a.energy_price);
  add_flag(*sub, FlagId::carbon_intensity, a.carbon_intensity);
  add_switch(*sub, FlagId::quiet, a.no_progress, "requests ended of the total, rate, ETA");
  add_flag(*sub, FlagId::speculative_config, a.speculative_config,
           "plus the acceptance: acceptance_rate, acceptance_length or acceptance_from (a steps.csv); method ngram, "
           "draft_model, eagle (EAGLE's head: one target layer) or medusa (Medusa-1's heads)");
  sub->callback([args] { run_mpi_command([&](MpiSession& mpi) { run(*args, mpi); }); });
}};

}  // namespace
}  // namespace twin::cli
