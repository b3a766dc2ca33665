// How the simulator's cost grows with the trace and the fleet: N requests of
// an Azure-conversation-shaped trace on R = 32, 128, 512 replicas, each run
// in a child process so its CPU time and peak RSS (getrusage) are its own.
//   bench_sim_scale [--requests N] [--replicas 32,128,512] [--rate RPS]
//                   [--steps all|none|sample:N] [--compress none|gz|zst]
//                   [--percentiles auto|exact|histogram]
//                   [--router-refresh-s S] [--jobs N] [--full]
// --jobs N > 1 needs a router refresh period > 0 (docs/simulate.md, "Router
// refresh and parallel runs"); CPU time then sums the threads.
// --full: 1,000,000 requests (the 27.3M-request week: --requests 27300000).
// Workload (docs/simulate.md, "Scale benchmark"): arrivals at the week's
// mean rate, 27.3M requests / 604,800 s = 45.1 req/s, gamma gaps with the
// conversation trace's interarrival cv 1.09; prompt and output lengths
// log-normal fits of the Azure conversation trace's (prompt p50 1020,
// mean 1155; output p50 129, mean 211). Llama-3.1-8B on H100, vLLM v1
// scheduling, least_outstanding routing. Results go to a temporary folder
// (removed), so output bytes are real files.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "sim/run.hpp"
#include "sim/sources.hpp"
#include "tools/bench/sim_workload.hpp"

using namespace twin;

namespace {

constexpr double kWeekRate = 27.3e6 / 604800.0;
const char* kPrompt = "lognormal:median=1020:sigma=0.8:max=14000";
const char* kOutput = "lognormal:median=129:sigma=0.95:max=1000";

struct Args {
  std::int64_t requests = 20'000;
  std::vector<int> replicas = {32, 128, 512};
  double rate = kWeekRate;
  std::string steps = "all", compress = "none", percentiles = "auto";
  double router_refresh_s = 0;
  int jobs = 1;
};

double seconds(const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; }

// One run; prints one row. In a child process.
void run_one(const Args& a, int replicas) {
  ClusterConfig c = bench::sim_cluster(replicas);  // the bench_sim cluster, R replicas
  c.router_refresh_s = a.router_refresh_s;
  GeneratorOptions gen;
  gen.max_requests = a.requests;
  gen.rate = a.rate;
  gen.arrivals = ArrivalKind::gamma;
  gen.cv = 1.09;
  gen.prompt = kPrompt;
  gen.output = kOutput;
  gen.seed = 1;
  GeneratorSource src(gen);
  const auto dir = std::filesystem::temp_directory_path() / ("twin_bench_sim_scale_" + std::to_string(::getpid()));
  RunOutputs out;
  out.out_dir = dir.string();
  out.overwrite = true;
  out.files.steps = parse_step_selection(a.steps, "--steps");
  out.files.compression = parse_csv_compression(a.compress, "--compress");
  out.jobs = a.jobs;
  if (a.percentiles == "exact") out.exact_percentile_requests = CollectorOptions::kAlwaysExact;
  if (a.percentiles == "histogram") out.exact_percentile_requests = 0;
  const auto start = std::chrono::steady_clock::now();
  const RunResult r = run_simulation(c, src, out);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::error_code ec;
  const auto summary_bytes = std::filesystem::file_size(dir / "summary.json", ec);
  std::filesystem::remove_all(dir, ec);
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double cpu = seconds(usage.ru_utime) + seconds(usage.ru_stime);
  std::printf("%8d %10lld %9.2f %9.2f %11.0f %10lld %11.0f %9.1f %13llu %10.0f\n", replicas,
              static_cast<long long>(a.requests), wall, cpu, static_cast<double>(a.requests) / cpu,
              static_cast<long long>(r.stats.steps), static_cast<double>(r.stats.steps) / cpu,
              static_cast<double>(usage.ru_maxrss) / 1024.0,
              static_cast<unsigned long long>(r.csv_bytes + (ec ? 0 : summary_bytes)), r.summary.simulated_time_s);
  std::fflush(stdout);
}

std::vector<int> parse_list(const char* text) {
  std::vector<int> out;
  for (const char* p = text; *p;) {
    char* end = nullptr;
    const long v = std::strtol(p, &end, 10);
    if (end == p || v < 1) {
      std::fprintf(stderr, "bench_sim_scale: --replicas wants a list like 32,128,512\n");
      std::exit(2);
    }
    out.push_back(static_cast<int>(v));
    p = *end == ',' ? end + 1 : end;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const bool has_value = i + 1 < argc;
    if (flag == "--full") {
      a.requests = 1'000'000;
    } else if (flag == "--requests" && has_value) {
      a.requests = std::atoll(argv[++i]);
    } else if (flag == "--replicas" && has_value) {
      a.replicas = parse_list(argv[++i]);
    } else if (flag == "--rate" && has_value) {
      a.rate = std::atof(argv[++i]);
    } else if (flag == "--steps" && has_value) {
      a.steps = argv[++i];
    } else if (flag == "--compress" && has_value) {
      a.compress = argv[++i];
    } else if (flag == "--router-refresh-s" && has_value) {
      a.router_refresh_s = std::atof(argv[++i]);
    } else if (flag == "--jobs" && has_value) {
      a.jobs = std::atoi(argv[++i]);
    } else if (flag == "--percentiles" && has_value) {
      a.percentiles = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: bench_sim_scale [--requests N] [--replicas 32,128,512] [--rate RPS] "
                   "[--steps all|none|sample:N] [--compress none|gz|zst] [--percentiles auto|exact|histogram] "
                   "[--router-refresh-s S] [--jobs N] [--full]\n");
      return 2;
    }
  }
  if (a.percentiles != "auto" && a.percentiles != "exact" && a.percentiles != "histogram") {
    std::fprintf(stderr, "bench_sim_scale: --percentiles is auto, exact or histogram\n");
    return 2;
  }
  if (a.jobs < 1 || a.jobs > 64 || !(a.router_refresh_s >= 0)) {
    std::fprintf(stderr, "bench_sim_scale: --jobs is 1 to 64 and --router-refresh-s at least 0\n");
    return 2;
  }
  if (a.requests < 1 || !(a.rate > 0)) {
    std::fprintf(stderr, "bench_sim_scale: --requests and --rate must be positive\n");
    return 2;
  }
  std::printf("Azure-conversation-shaped trace at %.1f req/s (gamma cv 1.09), Llama-3.1-8B on H100, %d thread(s), "
              "router refresh %g s;\nsteps %s, compress %s, percentiles %s; CPU time and peak RSS per run "
              "(each in its own process)\n",
              a.rate, a.jobs, a.router_refresh_s, a.steps.c_str(), a.compress.c_str(), a.percentiles.c_str());
  std::printf("%8s %10s %9s %9s %11s %10s %11s %9s %13s %10s\n", "replicas", "requests", "wall_s", "cpu_s", "requests/s",
              "steps", "steps/s", "rss_mb", "output_bytes", "virtual_s");
  for (const int replicas : a.replicas) {
    std::fflush(stdout);
    const pid_t child = fork();
    if (child < 0) {
      std::perror("bench_sim_scale: fork");
      return 1;
    }
    if (child == 0) {
      try {
        run_one(a, replicas);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_sim_scale: %s\n", e.what());
        _exit(1);
      }
      _exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
  }
  return 0;
}
