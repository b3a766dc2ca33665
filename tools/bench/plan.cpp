// bench_plan: how long planning Llama-3.1-8B takes over 3 hardware types x
// TP 1/2/4 x 3 chunk sizes (27 candidates) on the Azure 2023 conversation
// trace's first 10,000 requests (issue 45's case), with the plan command's
// defaults (2,000 requests per probe, 2% tolerance, every request in the
// cluster check), once as plans ran before issue 45 (the capacity search
// doubling from the planned rate, every run with its prefix cache) and once
// as today (down from the saturated throughput, the unused prefix cache
// skipped), in one run: wall and CPU time, probes and simulated requests of
// each, their ratios, and whether both choose the same deployment; then
// today's plan once more with the prefix cache kept, which must write the
// same plan.json bytes. Then
// the early rejection: a TPOT SLO below an A100's lone decode step, whose
// candidate the doubling search probed 17 times before giving up.
// Prints figures; asserts nothing (the machine is shared).
// Usage: bench_plan [TRACE] [JOBS] [REQUESTS]; REQUESTS 0: the whole trace.
// Without TRACE it reads the development data's azure2023_conv.csv and
// skips with a message when that is missing.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <string>

#include "planner/plan_report.hpp"
#include "planner/planner.hpp"
#include "planner/thread_pool.hpp"

namespace {

struct Timed {
  twin::PlanResult plan;
  double wall_s = 0, cpu_s = 0;
  std::size_t probes = 0, checks = 0, simulated = 0, rejected_early = 0;
};

Timed timed_plan(const twin::LoadedTrace& trace, const twin::PlanOptions& o) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const std::clock_t c0 = std::clock();  // the process's CPU, every thread
  Timed t;
  t.plan = twin::run_plan(trace, o);
  t.cpu_s = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  t.wall_s = std::chrono::duration<double>(clock::now() - t0).count();
  for (const auto& c : t.plan.candidates) {
    // The saturated probe runs before the search, in both searches.
    const std::size_t runs = c.capacity.probes.size() + (c.capacity.saturated_rps > 0 ? 1 : 0);
    t.probes += runs;
    t.checks += c.verify.size();
    t.simulated += runs * t.plan.probe_requests + c.verify.size() * t.plan.verify_requests;
    t.rejected_early += c.rejected_before_probing;
  }
  return t;
}

std::string chosen_text(const twin::PlanResult& plan) {
  if (plan.chosen < 0) return "none";
  const auto& c = plan.candidates[static_cast<std::size_t>(plan.chosen)];
  char buf[256];
  std::snprintf(buf, sizeof buf, "%d x %s, %d GPUs, $%.2f/h, capacity %.2f req/s per replica", c.replicas,
                twin::candidate_label(c.candidate).c_str(), c.gpus, c.cost_per_hour, c.capacity.capacity);
  return buf;
}

void print_run(const char* name, const Timed& t) {
  std::printf("  %-16s %6.2f s wall %6.2f s CPU  %4zu probes (with the saturated ones)  %2zu cluster checks  %8zu "
              "simulated requests  %zu rejected before probing\n",
              name, t.wall_s, t.cpu_s, t.probes, t.checks, t.simulated, t.rejected_early);
}

// Before: the doubling search, every run with the prefix cache as
// configured (plans before issue 45). After: today's defaults. With
// `same_bytes`, after's plan again without skipping the unused prefix cache,
// whose plan.json must be the same bytes.
void compare(const char* title, const twin::LoadedTrace& trace, twin::PlanOptions o, bool same_bytes) {
  std::printf("%s\n", title);
  o.capacity.search = twin::CapacitySearch::doubling;
  o.capacity.skip_unused_prefix_cache = false;
  const Timed before = timed_plan(trace, o);
  o.capacity.search = twin::CapacitySearch::from_saturation;
  o.capacity.skip_unused_prefix_cache = true;
  const Timed after = timed_plan(trace, o);
  print_run("doubling (before)", before);
  print_run("from saturation", after);
  std::printf("  before/after: wall %.2fx, CPU %.2fx, probes %.2fx, simulated requests %.2fx\n",
              before.wall_s / after.wall_s, before.cpu_s / after.cpu_s,
              static_cast<double>(before.probes) / static_cast<double>(after.probes),
              static_cast<double>(before.simulated) / static_cast<double>(after.simulated));
  const std::string a = chosen_text(before.plan), b = chosen_text(after.plan);
  std::printf("  chosen before: %s\n  chosen after:  %s\n  same deployment: %s (issue 45 target: plan <= 10 s wall)\n",
              a.c_str(), b.c_str(),
              before.plan.chosen == after.plan.chosen &&
                      (after.plan.chosen < 0 ||
                       before.plan.candidates[static_cast<std::size_t>(before.plan.chosen)].replicas ==
                           after.plan.candidates[static_cast<std::size_t>(after.plan.chosen)].replicas)
                  ? "yes"
                  : "NO");
  bool same_sizes = before.plan.candidates.size() == after.plan.candidates.size();
  for (std::size_t i = 0; same_sizes && i < after.plan.candidates.size(); ++i) {
    same_sizes = before.plan.candidates[i].replicas == after.plan.candidates[i].replicas &&
                 before.plan.candidates[i].status == after.plan.candidates[i].status;
  }
  std::printf("  same ranking, Pareto front, statuses and replica counts: %s\n",
              same_sizes && before.plan.ranking == after.plan.ranking && before.plan.pareto == after.plan.pareto ? "yes"
                                                                                                               : "no");
  if (same_bytes) {
    o.capacity.skip_unused_prefix_cache = false;
    const Timed kept = timed_plan(trace, o);
    const bool same = twin::plan_json(kept.plan, o).dump() == twin::plan_json(after.plan, o).dump();
    std::printf("  from saturation, the prefix cache kept in every run: %.2f s wall %.2f s CPU; plan.json the same "
                "bytes as with it skipped: %s\n",
                kept.wall_s, kept.cpu_s, same ? "yes" : "NO");
  }
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::string path = argc > 1 ? argv[1] : "";
  if (path.empty()) path = (fs::path(TWIN_SHARED_DIR) / "traces" / "azure2023_conv.csv").string();
  if (!fs::exists(path)) {
    std::printf("bench_plan: %s not found, skipped\n", path.c_str());
    return 0;
  }
  const int jobs = argc > 2 ? std::atoi(argv[2]) : 0;
  const long requests = argc > 3 ? std::atol(argv[3]) : 10000;
  twin::LoadedTrace trace = twin::load_trace(path);
  if (requests > 0 && trace.requests.size() > static_cast<std::size_t>(requests)) {
    trace.requests.resize(static_cast<std::size_t>(requests));
  }

  twin::PlanOptions o;
  o.space.model = "llama-3.1-8b";
  o.space.hardware = {"h100-80gb", "h200", "a100-80gb"};
  o.space.tp = {1, 2, 4};
  o.space.max_num_batched_tokens = {512, 2048, 8192};
  o.slos = "ttft_p90<=2s,tpot_p99<=100ms";
  o.jobs = jobs;
  twin::check_plan_options(o);
  std::printf("bench_plan: %s, first %zu requests at %.3f req/s, %d threads\n", path.c_str(), trace.requests.size(),
              twin::arrival_rate(trace), jobs > 0 ? jobs : twin::default_jobs());
  compare("27 candidates (llama-3.1-8b x h100-80gb/h200/a100-80gb x tp 1/2/4 x mbt 512/2048/8192), "
          "ttft_p90<=2s,tpot_p99<=100ms:",
          trace, o, true);

  // An SLO one candidate cannot meet at any load: an A100's lone decode step
  // of Llama-3.1-8B is about 8 ms. 500 probe requests keep the doubling
  // search's 17 probes of it short.
  o.space.tp = {1};
  o.space.max_num_batched_tokens = {2048};
  o.slos = "ttft_p90<=2s,tpot_p99<=7.5ms";
  o.capacity.probe_requests = 500;
  o.verify_requests = 2000;
  compare("\n3 candidates (tp 1, mbt 2048), tpot_p99<=7.5ms, 500 probe requests, 2,000 in the cluster check:", trace, o,
          false);
  return 0;
}
