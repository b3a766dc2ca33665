// twinserve plan: the cheapest deployment that meets the SLOs on a trace
// (docs/plan.md). Candidates run on a thread pool; under mpirun they are
// spread over the ranks and gathered on rank 0, which alone writes.
#include <CLI/CLI.hpp>

#include <chrono>
#include <iostream>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "metrics/output_dir.hpp"
#include "planner/mpi_split.hpp"
#include "planner/plan_report.hpp"
#include "planner/planner.hpp"
#include "planner/thread_pool.hpp"
#include "tools/twinserve/client_flags.hpp"
#include "tools/twinserve/capture.hpp"
#include "tools/twinserve/interrupt_guard.hpp"
#include "tools/twinserve/command_registry.hpp"
#include "tools/twinserve/common_flags.hpp"
#include "tools/twinserve/config_file.hpp"
#include "tools/twinserve/flag_checks.hpp"
#include "tools/twinserve/flag_registry.hpp"
#include "tools/twinserve/mpi_command.hpp"
#include "tools/twinserve/progress_line.hpp"

namespace twin::cli {
namespace {

struct PlanArgs {
  TraceInputFlags in;
  OutputFlags out;
  std::string slo, search_path, dtype, kv_dtype, quantization;
  ClientFlags clients;  // how every probe's and check's requests are sent
  std::optional<std::string> model;
  std::vector<std::string> hardware, presets, routers;
  std::vector<std::int32_t> tp, pp, max_num_batched_tokens, max_num_seqs;
  std::vector<std::int32_t> ep;        // expert parallel sizes (MoE)
  std::vector<std::string> pd;         // prefill:decode splits, "none" co-located
  std::vector<double> kv_dram_gib;     // host DRAM KV tier sizes per replica
  std::optional<std::int32_t> max_gpus;
  std::optional<std::string> max_model_len;  // a number, or vLLM's "auto" / -1
  std::optional<double> budget, target_rate;
  std::optional<double> max_power_kw, power_budget_w;  // issue 44: one budget, two spellings
  double energy_price = 0;                              // $/kWh
  double tolerance = 0.02;
  std::string capacity_search = "from-saturation";  // or "doubling": plans before issue 45
  std::int64_t probe_requests = 2000, verify_requests = 0;
  std::int32_t max_extra_replicas = 8;
  std::uint64_t seed = 0;
  int jobs = 0;
  bool no_plots = false, quiet = false;
};

PlanOptions make_options(const PlanArgs& a) {
  PlanOptions o;
  if (!a.search_path.empty()) load_search_file(o.space, a.search_path);
  if (a.model) o.space.model = *a.model;
  if (!a.dtype.empty()) o.space.dtype = a.dtype;
  if (!a.kv_dtype.empty()) o.space.kv_dtype = a.kv_dtype;
  if (!a.quantization.empty()) o.space.quantization = a.quantization;
  o.capacity.clients = client_options(a.clients);
  if (!a.hardware.empty()) o.space.hardware = a.hardware;
  if (!a.tp.empty()) o.space.tp = a.tp;
  if (!a.pp.empty()) o.space.pp = a.pp;
  if (!a.ep.empty()) o.space.ep = a.ep;
  if (!a.pd.empty()) {
    o.space.pd.clear();
    for (const std::string& split : a.pd) o.space.pd.push_back(parse_pd_split(split, "--pd"));
  }
  if (!a.kv_dram_gib.empty()) o.space.kv_dram_gib = a.kv_dram_gib;
  if (!a.presets.empty()) o.space.presets = a.presets;
  if (!a.routers.empty()) o.space.routers = a.routers;
  if (!a.max_num_batched_tokens.empty()) o.space.max_num_batched_tokens = a.max_num_batched_tokens;
  if (!a.max_num_seqs.empty()) o.space.max_num_seqs = a.max_num_seqs;
  if (a.max_gpus) o.space.max_gpus = *a.max_gpus;
  if (a.max_model_len) o.space.max_model_len = max_model_len_number(a.max_model_len).value_or(kMaxModelLenAuto);
  if (a.budget) o.space.budget = *a.budget;
  if (a.max_power_kw && a.power_budget_w) {
    throw UsageError("--max-power-kw and --power-budget-w are one budget: give one of them");
  }
  if (a.max_power_kw) o.space.power_budget_w = *a.max_power_kw * 1000.0;
  if (a.power_budget_w) o.space.power_budget_w = *a.power_budget_w;
  o.energy_price_per_kwh = a.energy_price;
  if (a.target_rate) o.target_rate = *a.target_rate;
  o.slos = a.slo;
  o.capacity.tolerance = a.tolerance;
  o.capacity.search = a.capacity_search == "doubling" ? CapacitySearch::doubling : CapacitySearch::from_saturation;
  if (a.probe_requests < 0) throw UsageError("--probe-requests: expected 0 (all) or a positive count");
  if (a.verify_requests < 0) throw UsageError("--verify-requests: expected 0 (all) or a positive count");
  if (a.max_extra_replicas < 0) throw UsageError("--max-extra-replicas: expected a count >= 0");
  o.capacity.probe_requests = static_cast<std::size_t>(a.probe_requests);
  o.verify_requests = static_cast<std::size_t>(a.verify_requests);
  o.max_extra_replicas = a.max_extra_replicas;
  o.seed = a.seed;
  o.jobs = a.jobs;
  return o;
}

// Under MPI: every rank's results gathered on rank 0. A rank stopped by a
// signal sends the candidates it finished and a marker saying so (index
// kStoppedMarker), so rank 0 tells a stop from a candidate lost. False on
// the other ranks, which have nothing to write (a stopped one throws
// Interrupted); on rank 0 `results` and `stopped` become the whole run's.
bool gather_across_ranks(const MpiSession& mpi, const std::vector<Candidate>& candidates,
                         const std::vector<std::size_t>& mine, std::vector<CandidateResult>& results, bool& stopped) {
  constexpr std::size_t kStoppedMarker = static_cast<std::size_t>(-1);
  std::vector<std::pair<std::size_t, std::string>> items;
  for (std::size_t k = 0; k < results.size(); ++k) items.emplace_back(mine[k], candidate_result_json(results[k]).dump());
  if (stopped) items.emplace_back(kStoppedMarker, std::string());
  const auto gathered = mpi.gather(items);
  if (mpi.rank() != 0) {
    if (stopped) throw Interrupted("plan (rank " + std::to_string(mpi.rank()) + "): stopped; rank 0 writes the plan");
    return false;
  }
  results.clear();
  for (const auto& [index, text] : gathered) {
    if (index == kStoppedMarker) {
      stopped = true;
    } else {
      results.push_back(candidate_result_from_json(nlohmann::json::parse(text)));
    }
  }
  if (!stopped && results.size() != candidates.size())
    throw Error("plan: gathered " + std::to_string(results.size()) + " of " + std::to_string(candidates.size()) +
                " candidates");
  return true;
}

void run_plan_command(const PlanArgs& a, const MpiSession& mpi) {
  const auto wall_start = std::chrono::steady_clock::now();
  const PlanOptions options = make_options(a);
  check_plan_options(options);
  if (mpi.rank() == 0) {
    const OutputDir refuse_early(a.out.dir, a.out.overwrite, plan_files());  // before the long part
  }
  LoadedTrace trace = load_trace(a.in.path, trace_read_options(a.in));
  if (a.in.max_requests > 0 && static_cast<std::int64_t>(trace.requests.size()) > a.in.max_requests) {
    trace.requests.resize(static_cast<std::size_t>(a.in.max_requests));
  }
  if (arrival_rate(trace) <= 0) {
    throw Error(a.in.path + ": plan needs at least two requests with different arrival times (a rate to size for)");
  }
  if (options.target_rate > 0 && arrival_rate(trace, options.verify_requests) <= 0) {
    throw Error(a.in.path + ": --target-rate rescales the cluster check's requests, and its first " +
                std::to_string(options.verify_requests) + " arrive at once (no rate to rescale); raise --verify-requests");
  }

  const std::vector<Candidate> candidates = plan_candidates(options);
  std::vector<std::size_t> mine;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (static_cast<int>(i % static_cast<std::size_t>(mpi.size())) == mpi.rank()) mine.push_back(i);
  }
  PlanOptions run_options = options;
  ProgressLine progress(mpi.size() > 1 ? "plan (rank " + std::to_string(mpi.rank()) + ")" : "plan", "candidates",
                        !a.quiet);
  run_options.progress = [&](std::size_t done, std::size_t total) {
    progress.update(static_cast<std::int64_t>(done), static_cast<std::int64_t>(total));
  };
  // The first Ctrl-C or SIGTERM starts no further candidate; those evaluated
  // are written. Under MPI every rank stops starting its own and rank 0
  // writes what the ranks gathered.
  InterruptGuard interrupts;
  run_options.stop = [] { return InterruptGuard::stop_requested(); };
  std::vector<CandidateResult> results = evaluate_some(candidates, mine, trace, run_options);
  progress.finish();
  bool stopped = results.size() < mine.size();
  if (mpi.active() && mpi.size() > 1 && !gather_across_ranks(mpi, candidates, mine, results, stopped)) return;
  PlanResult plan = assemble_plan(trace, options, std::move(results));
  plan.interrupted = stopped;
  plan.candidates_enumerated = candidates.size();
  if (PlanCapture* capture = plan_capture()) {  // the Python module: values, not a printed table
    (void)write_plan_outputs(a.out.dir, a.out.overwrite, !a.no_plots, plan, options);
    capture->json = plan_json(plan, options);
    capture->result = std::move(plan);
    capture->done = true;
    return;
  }
  print_plan(std::cout, plan);
  const std::string plots = write_plan_outputs(a.out.dir, a.out.overwrite, !a.no_plots, plan, options);
  std::size_t probes = 0, checks = 0;
  for (const auto& c : plan.candidates) {
    probes += c.capacity.probes.size();
    checks += c.verify.size();
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  std::cout << "\nEvaluated " << plan.candidates.size() << " candidates (" << probes << " capacity probes, " << checks
            << " cluster checks) in " << wall << " s wall on " << (options.jobs > 0 ? options.jobs : default_jobs())
            << " threads" << (mpi.size() > 1 ? " x " + std::to_string(mpi.size()) + " MPI ranks" : "") << "\n";
  std::cout << "Wrote plan.html (the report), plan.json, plan.csv, pareto.csv to " << a.out.dir << "; " << plots << "\n";
  if (stopped) {
    throw Interrupted(std::to_string(plan.candidates.size()) + " of " + std::to_string(candidates.size()) +
                      " candidates evaluated; the plan written to " + a.out.dir +
                      " covers those only (plan.json: \"interrupted\": true)");
  }
}

const RegisterCommand registration{"plan", [](CLI::App& root) {
  auto args = std::make_shared<PlanArgs>();
  auto& a = *args;
  auto* sub = root.add_subcommand("plan", "Find the cheapest deployment that meets SLOs on a trace (capacity planning)");
  add_trace_input_flags(*sub, a.in, "Request trace (any format `trace stats` reads)", true);
  add_trace_arrival_flags(*sub, a.in);
  add_flag(*sub, FlagId::slo, a.slo, "the SLOs to meet")->required();
  add_output_flags(*sub, a.out, "Write plan.json, plan.csv, pareto.csv and plots here", true);
  sub->add_option("--search", a.search_path, "Search space JSON (docs/plan.md); flags override its keys");
  add_config_file_flag(*sub, nullptr);
  add_flag(*sub, FlagId::model, a.model, "default llama-3.1-8b");
  add_flag(*sub, FlagId::dtype, a.dtype, "every candidate's (default: the model's)");
  add_flag(*sub, FlagId::kv_cache_dtype, a.kv_dtype, "every candidate's: fp8 for an fp8 KV capacity plan");
  add_flag(*sub, FlagId::quantization, a.quantization,
           "every candidate's: fp8, awq, gptq, int8_w8a8 or int8, as `simulate -q` takes them");
  add_flag(*sub, FlagId::hardware, a.hardware, "the profiles to try, comma-separated (default h100-80gb,h200,a100-80gb)")
      ->delimiter(',');
  add_flag(*sub, FlagId::tensor_parallel, a.tp, "the sizes to try, comma-separated; one value fixes it (default 1,2,4,8)")
      ->delimiter(',');
  add_flag(*sub, FlagId::pipeline_parallel, a.pp, "the sizes to try (default 1)")->delimiter(',');
  add_flag(*sub, FlagId::expert_parallel, a.ep, "the sizes to try, MoE models (default 1)")->delimiter(',');
  refuse_flag(*sub, FlagId::data_parallel,
              "plan scales data parallelism as replicas behind the router (it sizes their number); for vLLM's DP "
              "ranks inside one instance, `sweep --data-parallel-size 1,2,4` or `simulate -dp`");
  add_client_flags(*sub, a.clients);
  sub->add_option("--pd", a.pd,
                  "Prefill/decode splits to try, P:D replicas per unit, 'none' for co-located (default none; "
                  "e.g. none,1:1,1:2; docs/disaggregation.md)")
      ->delimiter(',');
  sub->add_option("--kv-dram-gib", a.kv_dram_gib,
                  "Host DRAM KV tier sizes to try, GiB per replica, 0 for none (default 0; docs/simulate.md, KV tiers)")
      ->delimiter(',')
      ->check(real_range(0, 1e9));
  add_flag(*sub, FlagId::scheduler, a.presets, "the presets to try, comma-separated (default vllm)")->delimiter(',');
  add_flag(*sub, FlagId::max_num_batched_tokens, a.max_num_batched_tokens, "the budgets to try (default: the preset's)")
      ->delimiter(',');
  add_flag(*sub, FlagId::max_num_seqs, a.max_num_seqs, "the limits to try (default: the preset's)")->delimiter(',');
  add_flag(*sub, FlagId::router, a.routers, "the routers to try (default least_outstanding)")->delimiter(',');
  add_flag(*sub, FlagId::max_model_len, a.max_model_len,
           "a candidate whose KV cache cannot hold one such request is pruned, as vLLM refuses to start; auto: each "
           "candidate the largest its KV cache holds");
  sub->add_option("--max-gpus", a.max_gpus, "At most this many GPUs in the deployment")->check(int_range(1, 1000000));
  sub->add_option("--budget", a.budget, "At most this many $ per hour")->check(real_range(0, 1e12, true));
  add_flag(*sub, FlagId::max_power_kw, a.max_power_kw);
  add_flag(*sub, FlagId::power_budget_w, a.power_budget_w);
  add_flag(*sub, FlagId::energy_price, a.energy_price, "a candidate's $/h adds its cluster check's electricity");
  sub->add_option("--target-rate", a.target_rate,
                  "Size for this mean arrival rate, req/s (growth; default: the trace's): the trace replayed at it")
      ->check(real_range(0, 1e12, true));
  sub->add_option("--tolerance", a.tolerance, "Relative tolerance of the capacity bisection (default 0.02)")->check(real_range(0, 1, true, true));
  sub->add_option("--capacity-search", a.capacity_search,
                  "from-saturation (default: down from the saturated throughput, out-of-reach SLOs rejected early) or "
                  "doubling (the search of plans before issue 45, to reproduce their numbers)")
      ->check(CLI::IsMember({"from-saturation", "doubling"}));
  sub->add_option("--probe-requests", a.probe_requests,
                  "Requests per capacity probe: the trace's first N (default 2000; 0: all)")->check(int_range(1, kMaxInt64));
  sub->add_option("--verify-requests", a.verify_requests, "Requests of the cluster check (default 0: the whole trace)")->check(int_range(0, kMaxInt64));
  sub->add_option("--max-extra-replicas", a.max_extra_replicas,
                  "Replicas added one at a time when the cluster check fails (default 8)")->check(int_range(0, 1000000));
  add_flag(*sub, FlagId::seed, a.seed, "here the routers'");
  add_flag(*sub, FlagId::jobs, a.jobs, "default: the hardware's")->check(thread_count());
  add_switch(*sub, FlagId::no_plots, a.no_plots);
  add_switch(*sub, FlagId::quiet, a.quiet);
  sub->callback([args] { run_mpi_command([&](MpiSession& mpi) { run_plan_command(*args, mpi); }); });
}};

}  // namespace
}  // namespace twin::cli
