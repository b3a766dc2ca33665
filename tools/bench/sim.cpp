// Simulator speed and memory: a big cluster run and a single-replica run.
//   bench_sim [REQUESTS]   (or TWIN_BENCH_SIM_REQUESTS; default 200,000 to keep
//                           `make bench` short; the figure is 1,000,000)
//   TWIN_BENCH_SIM_OUT=DIR  also writes the cluster run's requests.csv,
//                           steps.csv and summary.json there (overwriting), to
//                           check that a speed change left every byte alone
//   TWIN_BENCH_SIM_ONLY=1   runs only the cluster run with step records
//   TWIN_BENCH_SIM_PD=1     also runs the same requests through 16 prefill and
//                           16 decode replicas (prefill/decode disaggregation,
//                           KV transfers priced), at the same offered rate,
//                           and prints its CPU time against the 32 co-located
//                           (target <= 1.5x)
// Workload: Azure-2023-conversation-like lengths (log-normal fits of its
// prompt p50 1020 / mean 1155 and output p50 129 / mean 211), Poisson
// arrivals at 80% of the cluster's measured saturated request rate.
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "sim/run.hpp"
#include "sim/sources.hpp"

using namespace twin;

namespace {

const char* kPrompt = "lognormal:median=1020:sigma=0.8:max=14000";
const char* kOutput = "lognormal:median=129:sigma=0.95:max=1000";

long peak_rss_kb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  }
  return -1;
}

// `replicas` co-located replicas, or (pools) half prefill, half decode.
ClusterConfig cluster(int replicas, bool pools = false) {
  ClusterConfig c;
  ReplicaGroupConfig g;
  g.model = "llama-3.1-8b";
  g.hardware = "h100-80gb";
  g.count = replicas;
  if (pools) {
    ReplicaGroupConfig decode = g;
    g.role = "prefill";
    g.count = replicas / 2;
    decode.role = "decode";
    decode.count = replicas - g.count;
    c.groups.push_back(decode);
  }
  c.groups.insert(c.groups.begin(), g);
  c.scheduler_preset = "vllm";
  c.router = "least_outstanding";
  return c;
}

// Requests per second one replica completes when saturated.
double saturated_rate() {
  GeneratorOptions gen;
  gen.max_requests = 3000;
  gen.rate = 1e6;  // all at once, in effect
  gen.prompt = kPrompt;
  gen.output = kOutput;
  gen.seed = 99;
  GeneratorSource src(gen);
  const RunResult r = run_simulation(cluster(1), src, RunOutputs{});
  return r.summary.request_throughput;
}

// The run's CPU seconds.
double run(const char* label, int replicas, std::int64_t requests, double rate, const char* out_dir = nullptr,
           bool pools = false) {
  GeneratorOptions gen;
  gen.max_requests = requests;
  gen.rate = rate;
  gen.prompt = kPrompt;
  gen.output = kOutput;
  gen.seed = 1;
  GeneratorSource src(gen);
  const auto start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();
  RunOutputs outputs;
  if (out_dir) {
    outputs.out_dir = out_dir;
    outputs.overwrite = true;
  }
  const RunResult r = run_simulation(cluster(replicas, pools), src, outputs);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  double busy = 0;
  for (double b : r.stats.busy_fraction) busy += b;
  busy /= static_cast<double>(r.stats.busy_fraction.size());
  std::printf("%s: %lld requests, %d replicas, %.1f req/s offered\n", label, static_cast<long long>(requests), replicas,
              rate);
  std::printf("  wall time            %.2f s  (CPU %.2f s: the figure on a loaded machine)\n", wall, cpu);
  std::printf("  simulated time       %.1f s  (%.0f simulated s per wall s)\n", r.summary.simulated_time_s,
              r.summary.simulated_time_s / wall);
  std::printf("  steps                %lld  (%.0f steps/s, %.0f ns per step)\n", static_cast<long long>(r.stats.steps),
              static_cast<double>(r.stats.steps) / wall, wall * 1e9 / static_cast<double>(r.stats.steps));
  std::printf("  events               %lld, peak in flight %lld\n", static_cast<long long>(r.stats.events),
              static_cast<long long>(r.stats.max_in_flight));
  std::printf("  mean replica busy    %.0f%%;  TTFT p50 %.1f ms, TPOT p50 %.1f ms, completed %llu\n", busy * 100,
              r.summary.ttft_ms.p50, r.summary.tpot_ms.p50, static_cast<unsigned long long>(r.summary.completed));
  if (pools) {
    std::printf("  KV transfers         %llu, %.1f GB moved\n", static_cast<unsigned long long>(r.summary.kv_transfer.transfers),
                static_cast<double>(r.summary.kv_transfer.bytes) / 1e9);
  }
  std::printf("  peak RSS so far      %.1f MB\n", static_cast<double>(peak_rss_kb()) / 1024.0);
  return cpu;
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t requests = 200'000;
  if (const char* env = std::getenv("TWIN_BENCH_SIM_REQUESTS")) requests = std::atoll(env);
  if (argc > 1) requests = std::atoll(argv[1]);
  const char* out_dir = std::getenv("TWIN_BENCH_SIM_OUT");
  const bool only_cluster = std::getenv("TWIN_BENCH_SIM_ONLY") != nullptr;
  const double per_replica = saturated_rate();
  std::printf("one Llama-3.1-8B H100 replica saturates at %.2f req/s on this workload\n", per_replica);
  if (!only_cluster) run("single replica (target < 0.5 s)", 1, 10'000, 0.8 * per_replica);
  const double colocated =
      run("cluster (1M requests: target <= 30 s, <= 2 GB)", 32, requests, 0.8 * per_replica * 32, out_dir);
  if (std::getenv("TWIN_BENCH_SIM_PD")) {
    const double pd = run("16 prefill + 16 decode replicas, same requests and rate", 32, requests,
                          0.8 * per_replica * 32, nullptr, true);
    std::printf("disaggregated / co-located CPU time: %.2fx (target <= 1.5x)\n", pd / colocated);
  }
  return 0;
}
