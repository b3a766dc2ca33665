#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim_test_util.hpp"

using namespace twin;
using namespace twin::test;

namespace {

ListSource burst(int n, int prompt, int output, Time gap = 0) {
  ListSource s;
  for (int i = 0; i < n; ++i) {
    Request r;
    r.id = i;
    r.arrival = i * gap;
    r.prompt_len = prompt;
    r.output_len = output;
    s.requests.push_back(r);
  }
  return s;
}

double output_throughput(const CollectSink& sink) {
  Time first = sink.requests.front().arrival, last = 0;
  double tokens = 0;
  for (const auto& r : sink.requests) {
    first = std::min(first, r.arrival);
    last = std::max(last, r.finish);
    tokens += r.output_tokens;
  }
  return tokens / to_seconds(last - first);
}

CollectSink simulate(const ClusterConfig& config, RequestSource& source) {
  Cluster cluster = build_cluster(config);
  SimOptions options;
  options.record_steps = true;
  Simulator sim(std::move(cluster.replicas), options);
  CollectSink sink;
  sim.run(source, sink);
  return sink;
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("every request ends exactly once with sane times") {
  ClusterConfig config = one_group("llama-3.1-8b", "h100-80gb", 1, 1, 2);
  ListSource src = burst(200, 300, 50, 5 * kNsPerMs);
  CollectSink sink = simulate(config, src);
  REQUIRE(sink.requests.size() == 200);
  std::vector<RequestId> ids;
  for (const auto& r : sink.requests) {
    ids.push_back(r.id);
    CHECK(r.outcome == Outcome::finished);
    CHECK(r.output_tokens == 50);
    CHECK(r.first_token > r.arrival);
    CHECK(r.finish >= r.first_token);
  }
  std::sort(ids.begin(), ids.end());
  CHECK(std::adjacent_find(ids.begin(), ids.end()) == ids.end());
}

TEST_CASE("throughput grows with concurrency until the KV cache runs out") {
  // 512-token prompts + 256 outputs need 48 blocks of 16 at the end.
  auto run = [](int requests, int blocks) {
    ClusterConfig config = one_group("llama-3.1-8b", "h100-80gb");
    config.num_gpu_blocks_override = blocks;
    ListSource src = burst(requests, 512, 256);
    return simulate(config, src);
  };
  const double t4 = output_throughput(run(4, 100000));
  const double t32 = output_throughput(run(32, 100000));
  const double t128 = output_throughput(run(128, 100000));
  CHECK(t32 > 3 * t4);
  CHECK(t128 > 2 * t32);
  // With room for 8 whole requests (12 at prompt length), 128 of them run
  // no faster than a dozen do.
  CollectSink tight = run(128, 8 * 48);
  const double t_tight = output_throughput(tight);
  CHECK(t_tight < 0.3 * t128);
  std::int32_t max_batch = 0;
  for (const auto& s : tight.steps) max_batch = std::max(max_batch, s.batch_size);
  CHECK(max_batch <= 12);
}

TEST_CASE("pipeline parallelism keeps several micro-batches in flight") {
  auto run = [](int pp) {
    ClusterConfig config = one_group("llama-3.1-8b", "h100-80gb", 1, pp);
    config.num_gpu_blocks_override = 20000;
    ListSource src = burst(256, 256, 128);
    return simulate(config, src);
  };
  CollectSink one = run(1), two = run(2);
  // Plans overlap in time with PP=2.
  bool overlap = false;
  for (std::size_t i = 1; i < two.steps.size(); ++i) {
    if (two.steps[i].start < two.steps[i - 1].start + two.steps[i - 1].duration) overlap = true;
  }
  CHECK(overlap);
  const double ratio = output_throughput(two) / output_throughput(one);
  INFO("PP=2 / PP=1 output throughput " << ratio);
  CHECK(ratio > 1.3);
  CHECK(ratio < 2.2);
}

TEST_CASE("Little's law holds on a steady run") {
  ClusterConfig config = one_group("llama-3.1-8b", "h100-80gb", 1, 1, 2);
  GeneratorOptions gen;
  gen.max_requests = 6000;
  gen.rate = 25;
  gen.prompt = "lognormal:median=400:sigma=0.8:max=4096";
  gen.output = "lognormal:median=150:sigma=0.7:max=1024";
  gen.seed = 7;
  GeneratorSource src(gen);
  CollectSink sink = simulate(config, src);
  REQUIRE(sink.requests.size() == 6000);
  Time end = 0;
  for (const auto& r : sink.requests) end = std::max(end, r.arrival);
  // A window in the middle of the run: no warm-up, no drain.
  const Time lo = end / 4, hi = 3 * end / 4;
  double area = 0, latency_sum = 0;
  int arrived = 0;
  for (const auto& r : sink.requests) {
    const Time a = std::max(r.arrival, lo), b = std::min(r.finish, hi);
    if (b > a) area += static_cast<double>(b - a);
    if (r.arrival >= lo && r.arrival < hi) {
      ++arrived;
      latency_sum += static_cast<double>(r.finish - r.arrival);
    }
  }
  const double mean_in_system = area / static_cast<double>(hi - lo);
  const double rate = arrived / static_cast<double>(hi - lo);
  const double mean_latency = latency_sum / arrived;
  INFO("L = " << mean_in_system << ", lambda x W = " << rate * mean_latency);
  CHECK(mean_in_system > 5);  // a loaded system, not a trivial one
  CHECK(mean_in_system == Approx(rate * mean_latency).epsilon(0.05));
}

TEST_CASE("same inputs and seed give the same bytes") {
  namespace fs = std::filesystem;
  const fs::path base = fs::temp_directory_path() / "twin_sim_determinism";
  fs::remove_all(base);
  auto run = [&](const std::string& name) {
    ClusterConfig config = one_group("llama-3.1-8b", "h100-80gb", 1, 1, 3);
    config.router = "power_of_two";
    config.seed = 11;
    GeneratorOptions gen;
    gen.max_requests = 800;
    gen.rate = 30;
    gen.prefix_count = 4;
    gen.prefix_tokens = 256;
    gen.prefix_fraction = 0.5;
    gen.seed = 3;
    GeneratorSource src(gen);
    RunOutputs out;
    out.out_dir = (base / name).string();
    return run_simulation(config, src, out);
  };
  const RunResult a = run("a");
  const RunResult b = run("b");
  CHECK(a.summary.prefix_cache_hit_rate > 0);
  for (const char* file : {"requests.csv", "steps.csv"}) {
    const std::string x = slurp(base / "a" / file), y = slurp(base / "b" / file);
    CHECK(x.size() > 1000);
    CHECK(x == y);
  }
  // summary.json differs only in the wall time.
  auto strip_wall = [](std::string s) {
    std::string out;
    std::istringstream in(s);
    for (std::string line; std::getline(in, line);)
      if (line.find("wall_time_s") == std::string::npos) out += line + "\n";
    return out;
  };
  CHECK(strip_wall(slurp(base / "a" / "summary.json")) == strip_wall(slurp(base / "b" / "summary.json")));
  fs::remove_all(base);
}

TEST_CASE("heterogeneous groups run side by side") {
  ClusterConfig config = one_group("llama-3.1-8b", "h100-80gb", 1, 1, 1);
  ReplicaGroupConfig a100 = config.groups[0];
  a100.hardware = "a100-80gb";
  a100.count = 1;
  config.groups.push_back(a100);
  config.router = "round_robin";
  Cluster cluster = build_cluster(config);
  CHECK(cluster.groups.size() == 2);
  CHECK(cluster.groups[1].first_replica == 1);
  CHECK(cluster.num_gpus() == 16);  // one node of each kind
  ListSource src = burst(100, 1000, 100, 20 * kNsPerMs);
  CollectSink sink = simulate(config, src);
  double e2e[2] = {0, 0};
  for (const auto& r : sink.requests) e2e[r.replica] += static_cast<double>(r.finish - r.arrival);
  CHECK(e2e[1] > 1.2 * e2e[0]);  // the A100 replica is slower
}

namespace {

// Every step takes 1 ms; remembers the idle gap the simulator passed in.
class IdleRecorder final : public CostModel {
 public:
  std::vector<Time> idle;
  Time stage_time(const StepInput& step, std::vector<OpCost>*) override {
    idle.push_back(step.idle_ns);
    return 1'000'000;
  }
  Time swap_time(std::int64_t) override { return 0; }
};

}  // namespace

TEST_CASE("the cost model sees how long the replica sat idle before each step") {
  auto model = std::make_shared<IdleRecorder>();
  std::vector<SimReplicaSpec> specs(1);
  specs[0].config = replica_preset("vllm");
  specs[0].config.kv.num_blocks = 64;
  specs[0].cost_model = model;
  Simulator sim(std::move(specs), SimOptions{});
  // Request 0 arrives at 0 (prefill + one decode: 2 ms of steps), request 1
  // at 10 ms, after the engine sat idle for 8 ms.
  ListSource source = burst(2, 16, 2, 10'000'000);
  CollectSink sink;
  sim.run(source, sink);
  REQUIRE(model->idle.size() == 4);
  // The engine's first step at t = 0: idle since before it (1 ns), so no
  // cost model takes it for a step that follows another back to back.
  CHECK(model->idle[0] == 1);
  CHECK(model->idle[1] == 0);  // back to back
  CHECK(model->idle[2] == 8'000'000);
  CHECK(model->idle[3] == 0);
}
