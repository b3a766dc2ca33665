// vLLM's data parallelism in the simulator (docs/simulate.md, "Data
// parallelism"): a dense DP instance is its ranks as replicas under vLLM's
// DP coordinator (router dp_balance), each with the limits and KV cache as
// given; bad combinations are refused naming the flags and keys.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "sim/data_parallel.hpp"
#include "sim_test_util.hpp"
#include "tests/support/run_cli.hpp"
#include "traces/generator.hpp"

using namespace twin;
using namespace twin::test;

namespace {

CollectSink simulate(const ClusterConfig& config, double rate = 40) {
  GeneratorOptions gen;
  gen.max_requests = 400;
  gen.rate = rate;
  gen.seed = 5;
  GeneratorSource src(gen);
  Cluster cluster = build_cluster(config);
  SimOptions options;
  options.router = cluster.router;
  options.lockstep = cluster.lockstep;
  options.record_steps = true;
  Simulator sim(std::move(cluster.replicas), options);
  CollectSink sink;
  sim.run(src, sink);
  return sink;
}

ClusterConfig limited(ClusterConfig c) {
  c.scheduler_options = {{"max_num_seqs", "16"}, {"max_num_batched_tokens", "2048"}, {"max_model_len", "8192"}};
  c.num_gpu_blocks_override = 3000;
  return c;
}

// GPUs the replicas were placed on (the topology adds whole nodes).
std::size_t gpus_placed(const Cluster& c) {
  std::size_t n = 0;
  for (const GroupPlan& g : c.groups)
    for (const auto& r : g.replica_gpus) n += r.size();
  return n;
}

std::string refusal(const ClusterConfig& c) {
  try {
    (void)build_cluster(c);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("DP: a dense DP2 instance is two replicas under dp_balance", "[sim][dp]") {
  ClusterConfig dp = limited(one_group("llama-3.1-8b", "h100-80gb"));
  dp.groups[0].dp = 2;
  ClusterConfig two = limited(one_group("llama-3.1-8b", "h100-80gb", 1, 1, 2));
  two.router = "dp_balance";

  const Cluster built = build_cluster(dp);
  CHECK(built.router == "dp_balance");
  REQUIRE(built.replicas.size() == 2);
  CHECK(gpus_placed(built) == 2);
  // Each rank keeps the limits and the KV blocks as given (vLLM applies them per rank).
  for (const SimReplicaSpec& r : built.replicas) {
    CHECK(r.config.scheduler.max_num_seqs == 16);
    CHECK(r.config.kv.num_blocks == 3000);
  }

  const CollectSink a = simulate(dp), b = simulate(two);
  REQUIRE(a.requests.size() == 400);
  REQUIRE(a.requests.size() == b.requests.size());
  int on_second = 0;
  for (std::size_t i = 0; i < a.requests.size(); ++i) {
    CHECK(a.requests[i].id == b.requests[i].id);
    CHECK(a.requests[i].replica == b.requests[i].replica);
    CHECK(a.requests[i].first_token == b.requests[i].first_token);
    CHECK(a.requests[i].finish == b.requests[i].finish);
    on_second += a.requests[i].replica == 1;
  }
  CHECK(on_second > 100);  // both ranks serve
  REQUIRE(a.steps.size() == b.steps.size());
  for (std::size_t i = 0; i < a.steps.size(); ++i) {
    CHECK(a.steps[i].replica == b.steps[i].replica);
    CHECK(a.steps[i].start == b.steps[i].start);
    CHECK(a.steps[i].duration == b.steps[i].duration);
    CHECK(a.steps[i].batch_size <= 16);
  }
  // round_robin is another policy: the same trace places requests otherwise.
  ClusterConfig rr = two;
  rr.router = "round_robin";
  const CollectSink c = simulate(rr);
  bool differs = false;
  for (std::size_t i = 0; i < c.requests.size(); ++i) differs |= c.requests[i].replica != a.requests[i].replica;
  CHECK(differs);
}

TEST_CASE("DP: bad combinations are refused naming the flags", "[sim][dp]") {
  ClusterConfig c = one_group("llama-3.1-8b", "h100-80gb");
  c.groups[0].dp = 2;
  c.router = "least_kv";
  c.router_given = true;
  CHECK_THAT(refusal(c), Catch::Contains("--router least_kv") && Catch::Contains("dp_balance"));
  c.router = "dp_balance";
  CHECK(refusal(c) == "(accepted)");
  c.groups[0].count = 2;
  CHECK_THAT(refusal(c), Catch::Contains("--data-parallel-size 2") && Catch::Contains("count 1"));

  ClusterConfig dense = one_group("llama-3.1-8b", "h100-80gb");
  dense.groups[0].enable_expert_parallel = true;
  CHECK_THAT(refusal(dense), Catch::Contains("--enable-expert-parallel") && Catch::Contains("mixture-of-experts"));

  ClusterConfig moe = one_group("mixtral-8x7b", "h100-80gb", 2);
  moe.groups[0].dp = 2;
  moe.groups[0].ep = 2;
  CHECK_THAT(refusal(moe), Catch::Contains("--data-parallel-size 2") && Catch::Contains("--ep 2"));
  moe.groups[0].ep = 1;
  // MoE without --enable-expert-parallel: independent ranks, as a dense model's.
  CHECK(refusal(moe) == "(accepted)");
  moe.groups[0].enable_expert_parallel = true;
  moe.groups[0].pp = 2;
  CHECK_THAT(refusal(moe), Catch::Contains("--enable-expert-parallel") && Catch::Contains("--pp"));
  moe.groups[0].pp = 1;
  moe.router_refresh_s = 0.1;
  CHECK_THAT(refusal(moe), Catch::Contains("--router-refresh-s"));
  moe.router_refresh_s = 0;
  CHECK(refusal(moe) == "(accepted)");
  moe.groups[0].dp = 1;
  CHECK_THAT(refusal(moe), Catch::Contains("--enable-expert-parallel with --tensor-parallel-size 2"));
}

TEST_CASE("DP x EP: ranks keep their own limits and step in lockstep", "[sim][dp][ep]") {
  // Mixtral, DP2 x EP2 with vLLM's per-rank limits as given.
  ClusterConfig c = limited(one_group("mixtral-8x7b", "h100-80gb"));
  c.num_gpu_blocks_override = 1500;
  c.groups[0].dp = 2;
  c.groups[0].enable_expert_parallel = true;
  const Cluster built = build_cluster(c);
  REQUIRE(built.replicas.size() == 2);
  CHECK(gpus_placed(built) == 2);
  CHECK(built.router == "dp_balance");
  CHECK(built.lockstep == std::vector<std::int32_t>{0, 0});
  CHECK(built.groups[0].layout.ep == 2);  // experts split over the ranks
  for (const SimReplicaSpec& r : built.replicas) {
    CHECK(r.config.scheduler.max_num_seqs == 16);
    CHECK(r.config.kv.num_blocks == 1500);  // per rank, as vLLM's override
  }

  const CollectSink sink = simulate(c, 30);
  REQUIRE(sink.requests.size() == 400);
  std::vector<const StepRecord*> rank[2];
  std::int32_t most_seqs[2] = {0, 0}, most_blocks[2] = {0, 0};
  for (const StepRecord& s : sink.steps) {
    REQUIRE((s.replica == 0 || s.replica == 1));
    CHECK(s.batch_size <= 16);
    CHECK(s.new_tokens <= 2048);
    CHECK(s.kv_blocks_used <= 1500);
    most_seqs[s.replica] = std::max(most_seqs[s.replica], s.batch_size);
    most_blocks[s.replica] = std::max(most_blocks[s.replica], s.kv_blocks_used);
    rank[s.replica].push_back(&s);
  }
  // The limits bind on both ranks: one scheduler over both would exceed them.
  for (int r = 0; r < 2; ++r) {
    CHECK(most_seqs[r] == 16);
    CHECK(most_blocks[r] > 300);
  }
  REQUIRE(rank[0].size() > 50);
  REQUIRE(rank[1].size() > 50);
  // Lockstep: a step of one rank either is the other's step (same start and
  // end) or does not overlap any of the other's steps (that rank ran a
  // dummy batch beside it).
  int together = 0;
  for (const StepRecord* a : rank[0]) {
    for (const StepRecord* b : rank[1]) {
      const bool overlap = a->start < b->start + b->duration && b->start < a->start + a->duration;
      if (!overlap) continue;
      CHECK(a->start == b->start);
      CHECK(a->duration == b->duration);
      ++together;
    }
  }
  CHECK(together > 50);
  // Steps follow one another: no rank starts a step while the group's last one runs.
  std::vector<const StepRecord*> all;
  for (const StepRecord& s : sink.steps) all.push_back(&s);
  std::sort(all.begin(), all.end(), [](const StepRecord* x, const StepRecord* y) { return x->start < y->start; });
  for (std::size_t i = 1; i < all.size(); ++i) {
    if (all[i]->start != all[i - 1]->start) CHECK(all[i]->start >= all[i - 1]->start + all[i - 1]->duration);
  }
}

TEST_CASE("DP x EP: a rank's step is priced on its own batch, experts on all", "[sim][dp][ep]") {
  ClusterConfig c = one_group("mixtral-8x7b", "h100-80gb");
  c.groups[0].dp = 2;
  c.groups[0].enable_expert_parallel = true;
  Cluster built = build_cluster(c);
  CostModel& model = *built.replicas[0].cost_model;
  const BatchShape own = decode_batch(32, 1000);
  StepPlan plan;
  StepInput alone{&plan, &own, 0, 0};
  alone.group_tokens = 32;  // the other rank is idle
  StepInput busy = alone;
  busy.group_tokens = 32 + 256;  // the other rank routes 256 tokens too
  const Time t_alone = model.stage_time(alone), t_busy = model.stage_time(busy);
  CHECK(t_busy > t_alone);  // more routed rows for this rank's experts
  // --ep 2's one scheduler prices half of a 64-seq batch per rank: the same
  // attention work as this rank's 32 seqs with the other rank's 32 routed.
  StepInput same = alone;
  same.group_tokens = 64;
  ClusterConfig ep = one_group("mixtral-8x7b", "h100-80gb");
  ep.groups[0].ep = 2;
  Cluster ep_built = build_cluster(ep);
  const BatchShape both = decode_batch(64, 1000);
  StepInput whole{&plan, &both, 0, 0};
  CHECK(model.stage_time(same) == ep_built.replicas[0].cost_model->stage_time(whole));
}

TEST_CASE("DP: the command line takes vLLM's flags", "[sim][dp][cli]") {
  const CliRun ok = run_twinserve(
      "simulate --model llama-3.1-8b --hw h100-80gb --data-parallel-size 2 --max-num-seqs 64 --explain-memory", true);
  INFO(ok.out);
  CHECK(ok.exit_code == 0);
  CHECK_THAT(ok.out, Catch::Contains("dp=2 (per rank:)") && Catch::Contains("max_num_seqs 64"));
  const CliRun bad = run_twinserve(
      "simulate --model llama-3.1-8b --hw h100-80gb --data-parallel-size 2 --router round_robin --explain-memory", true);
  INFO(bad.out);
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.out, Catch::Contains("--router round_robin") && Catch::Contains("--data-parallel-size 2"));
}
