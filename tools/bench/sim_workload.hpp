#pragma once
// The simulator benchmarks' cluster workload: Azure-2023-conversation-like
// lengths (log-normal fits of its prompt p50 1020 / mean 1155 and output p50
// 129 / mean 211) on Llama-3.1-8B / H100 replicas behind least_outstanding,
// Poisson arrivals offered at a share of the measured saturated rate.
#include "sim/run.hpp"
#include "sim/sources.hpp"

namespace twin::bench {

inline constexpr const char* kSimPrompt = "lognormal:median=1020:sigma=0.8:max=14000";
inline constexpr const char* kSimOutput = "lognormal:median=129:sigma=0.95:max=1000";

inline ClusterConfig sim_cluster(int replicas) {
  ClusterConfig c;
  ReplicaGroupConfig g;
  g.model = "llama-3.1-8b";
  g.hardware = "h100-80gb";
  g.count = replicas;
  c.groups.push_back(g);
  c.scheduler_preset = "vllm";
  c.router = "least_outstanding";
  return c;
}

inline GeneratorOptions sim_requests(std::int64_t requests, double rate, std::uint64_t seed = 1) {
  GeneratorOptions gen;
  gen.max_requests = requests;
  gen.rate = rate;
  gen.prompt = kSimPrompt;
  gen.output = kSimOutput;
  gen.seed = seed;
  return gen;
}

// Requests per second one replica completes when saturated (3,000 at once).
inline double sim_saturated_rate() {
  GeneratorSource src(sim_requests(3000, 1e6, 99));
  return run_simulation(sim_cluster(1), src, RunOutputs{}).summary.request_throughput;
}

}  // namespace twin::bench
