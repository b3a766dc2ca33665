// Router refresh and --jobs (docs/simulate.md, "Router refresh"): the
// bench_sim cluster (32 replicas at 80% of saturation) at refresh 0 (the
// serial loop), then at a refresh period with 1 and with 2 threads.
//   bench_sim_jobs [REQUESTS]     (or TWIN_BENCH_SIM_REQUESTS; default 200,000)
//   TWIN_BENCH_SIM_REFRESH_S=S    the refresh period (default 0.1)
//   TWIN_BENCH_SIM_OUT=DIR        also writes each run's files under DIR/serial,
//                                 DIR/j1, DIR/j2 and says whether j1 and j2 match
// CPU time is the process's, all threads; on a shared machine compare it
// and read wall times with the load in mind.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tools/bench/sim_workload.hpp"

using namespace twin;

namespace {

struct Figures {
  double wall = 0, cpu = 0;
};

Figures run(const char* label, std::int64_t requests, double rate, double refresh_s, int jobs, const std::string& out) {
  GeneratorSource src(bench::sim_requests(requests, rate));
  ClusterConfig config = bench::sim_cluster(32);
  config.router_refresh_s = refresh_s;
  RunOutputs outputs;
  outputs.jobs = jobs;
  if (!out.empty()) {
    outputs.out_dir = out;
    outputs.overwrite = true;
  }
  const auto start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();
  const RunResult r = run_simulation(config, src, outputs);
  Figures f;
  f.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  f.cpu = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  std::printf("%-34s wall %7.2f s  CPU %7.2f s  %9lld steps (%6.0f k/s wall)  TTFT p50 %6.1f ms  TPOT p50 %5.1f ms\n",
              label, f.wall, f.cpu, static_cast<long long>(r.stats.steps),
              static_cast<double>(r.stats.steps) / f.wall / 1e3, r.summary.ttft_ms.p50, r.summary.tpot_ms.p50);
  return f;
}

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// summary.json less its wall time.
std::string summary_body(const std::filesystem::path& dir) {
  std::istringstream in(read(dir / "summary.json"));
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.find("\"wall_time_s\"") == std::string::npos) out += line + "\n";
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t requests = 200'000;
  if (const char* env = std::getenv("TWIN_BENCH_SIM_REQUESTS")) requests = std::atoll(env);
  if (argc > 1) requests = std::atoll(argv[1]);
  double refresh = 0.1;
  if (const char* env = std::getenv("TWIN_BENCH_SIM_REFRESH_S")) refresh = std::atof(env);
  const char* out_env = std::getenv("TWIN_BENCH_SIM_OUT");
  const std::string out = out_env ? out_env : "";
  auto dir = [&](const char* name) { return out.empty() ? std::string() : out + "/" + name; };
  const double rate = 0.8 * bench::sim_saturated_rate() * 32;
  std::printf("%lld requests on 32 replicas at %.1f req/s, router refresh %g s\n", static_cast<long long>(requests), rate,
              refresh);
  const Figures serial = run("refresh 0 (serial loop)", requests, rate, 0, 1, dir("serial"));
  const Figures one = run("refresh, --jobs 1", requests, rate, refresh, 1, dir("j1"));
  const Figures two = run("refresh, --jobs 2", requests, rate, refresh, 2, dir("j2"));
  std::printf("--jobs 2 vs --jobs 1: %.2fx wall, %.2fx CPU; --jobs 1 vs refresh 0: %.2fx CPU\n", one.wall / two.wall,
              two.cpu / one.cpu, one.cpu / serial.cpu);
  if (!out.empty()) {
    const bool same = read(dir("j1") + "/requests.csv") == read(dir("j2") + "/requests.csv") &&
                      read(dir("j1") + "/steps.csv") == read(dir("j2") + "/steps.csv") &&
                      summary_body(dir("j1")) == summary_body(dir("j2"));
    std::printf("--jobs 1 and 2 files: %s\n", same ? "identical" : "DIFFERENT");
    if (!same) return 1;
  }
  return 0;
}
