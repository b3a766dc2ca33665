// bench_plan: how long planning Llama-3.1-8B takes over 3 hardware types x
// TP 1/2/4 x 3 chunk sizes on the Azure 2023 conversation trace, with the
// plan command's defaults (2,000 requests per probe, 2% tolerance, the
// whole trace for the cluster check). Prints figures; asserts nothing.
// Usage: bench_plan [TRACE] [JOBS]; without TRACE it reads
// ../shared/traces/azure2023_conv.csv next to the repository and skips
// with a message when that is missing.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "planner/planner.hpp"
#include "planner/thread_pool.hpp"

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::string path = argc > 1 ? argv[1] : "";
  if (path.empty()) {
    const fs::path repo = fs::path(__FILE__).parent_path().parent_path().parent_path();
    path = (repo.parent_path() / "shared" / "traces" / "azure2023_conv.csv").string();
  }
  if (!fs::exists(path)) {
    std::printf("bench_plan: %s not found, skipped\n", path.c_str());
    return 0;
  }
  const int jobs = argc > 2 ? std::atoi(argv[2]) : 0;
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const twin::LoadedTrace trace = twin::load_trace(path);
  const auto t1 = clock::now();

  twin::PlanOptions o;
  o.space.model = "llama-3.1-8b";
  o.space.hardware = {"h100-80gb", "h200", "a100-80gb"};
  o.space.tp = {1, 2, 4};
  o.space.max_num_batched_tokens = {512, 2048, 8192};
  o.slos = "ttft_p90<=2s,tpot_p99<=100ms";
  o.jobs = jobs;
  twin::check_plan_options(o);
  const twin::PlanResult plan = twin::run_plan(trace, o);
  const auto t2 = clock::now();

  std::size_t probes = 0, checks = 0, probe_reqs = 0, check_reqs = 0;
  for (const auto& c : plan.candidates) {
    probes += c.capacity.probes.size();
    checks += c.verify.size();
    probe_reqs += c.capacity.probes.size() * plan.probe_requests;
    check_reqs += c.verify.size() * plan.verify_requests;
  }
  const double load_s = std::chrono::duration<double>(t1 - t0).count();
  const double plan_s = std::chrono::duration<double>(t2 - t1).count();
  std::printf("bench_plan: %s, %zu requests at %.3f req/s\n", path.c_str(), plan.trace_requests, plan.trace_rate);
  std::printf("  %zu candidates (llama-3.1-8b x 3 hardware x tp 1/2/4 x mbt 512/2048/8192), %d threads\n",
              plan.candidates.size(), jobs > 0 ? jobs : twin::default_jobs());
  std::printf("  %zu capacity probes (%zu simulated requests), %zu cluster checks (%zu requests)\n", probes, probe_reqs, checks,
              check_reqs);
  std::printf("  trace load %.2f s, plan %.2f s wall (target: under 120 s on 2 cores)\n", load_s, plan_s);
  if (plan.chosen >= 0) {
    const auto& c = plan.candidates[static_cast<std::size_t>(plan.chosen)];
    std::printf("  chosen: %d x %s, %d GPUs, $%.2f/h, capacity %.2f req/s per replica\n", c.replicas,
                twin::candidate_label(c.candidate).c_str(), c.gpus, c.cost_per_hour, c.capacity.capacity);
  }
  return 0;
}
