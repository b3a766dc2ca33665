// The engine's KV tiers below the device (engine/runtime/kv_tier_store): a
// prefix block evicted from the device spills to host memory (and from
// there to a file), and a later request that hits it has its KV loaded
// back instead of recomputed. Loaded KV must give the tokens recomputing it
// gives, and the simulator replaying the engine's step log must give its
// records exactly (the tiers' books are the core's on both sides).
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "engine/core/timeline.hpp"
#include "engine/runtime/engine.hpp"
#include "sim/cluster.hpp"
#include "sim/kv_tier_model.hpp"
#include "sim/replay_cost_model.hpp"
#include "sim/simulator.hpp"
#include "tests/parity/parity_support.hpp"

namespace twin::test {
namespace {

constexpr double kTimeScale = 2.0;

struct TierRun {
  std::vector<RequestRecord> requests;
  std::vector<StepRecord> steps;
  std::map<RequestId, std::vector<TokenId>> tokens;
  ReplicaConfig replica;  // as served: the tiers' capacities included
  std::int64_t cached_tokens = 0;
  std::int64_t tier_loads = 0;
};

// The tiny model on the CPU, one request per step (so each token is computed
// by the same ops in every run, whatever the timing), 12 device blocks of 8
// tokens: requests evict each other's prefix blocks.
ClusterConfig tiny_replica() {
  return tiny_cluster("vllm", 12, {{"max_model_len", "128"}, {"block_size", "8"}, {"max_num_seqs", "1"}});
}

TierRun run_engine(std::int32_t dram_blocks, std::int32_t ssd_blocks, const std::vector<Request>& trace) {
  Cluster cluster = build_cluster(tiny_replica());
  EngineSettings settings;
  settings.model = "tiny";
  settings.replica = cluster.groups.front().replica;
  settings.runner.threads = 1;
  settings.runner.seed = 3;
  const std::int64_t block_bytes = kv_block_bytes(engine_model_config(settings), 8, "f32");
  settings.runner.kv_offload_dram_bytes = dram_blocks * block_bytes;
  settings.runner.kv_offload_ssd_bytes = ssd_blocks * block_bytes;
  Engine engine(settings);
  VectorSource source(trace);
  CollectSink sink;
  TierRun run;
  DriveOptions options;
  options.time_scale = kTimeScale;
  options.token_seed = 3;
  options.on_output = [&](const RequestRecord& r, const std::vector<TokenId>& t) { run.tokens[r.id] = t; };
  const DriveStats stats = engine.serve(source, sink, options);
  CHECK(stats.unserved == 0);
  run.requests = std::move(sink.requests);
  run.steps = std::move(sink.steps);
  run.replica = engine.replica_config();
  for (const RequestRecord& r : run.requests) run.cached_tokens += r.cached_prompt_tokens;
  for (const StepRecord& s : run.steps) {
    for (const std::int32_t n : s.tier_loads) run.tier_loads += n;
  }
  return run;
}

// Three system prompts of three blocks taken in turn, each request with
// one to three blocks of its own: between two uses of a prompt the other
// requests' blocks cycle through the 12 device blocks and evict it.
std::vector<Request> shared_prefix_trace() {
  std::vector<Request> trace = bursty_trace(30, 5.0, 60, 6);
  for (Request& r : trace) {
    const auto prompt = static_cast<std::uint64_t>(r.id % 3);
    const std::int32_t own = 1 + static_cast<std::int32_t>((r.id / 3) % 3);
    r.hash_block_size = 8;
    r.hash_ids.clear();
    for (std::uint64_t b = 0; b < 3; ++b) r.hash_ids.push_back(1000 * (prompt + 1) + b);
    for (std::int32_t b = 0; b < own; ++b) r.hash_ids.push_back(5000 + static_cast<std::uint64_t>(r.id) * 16 + b);
    r.prompt_len = (3 + own - 1) * 8 + 1 + static_cast<std::int32_t>(r.id % 8);
  }
  return trace;
}

}  // namespace

TEST_CASE("prefix KV spilled to the engine's host-memory and file tiers loads back and gives recomputation's tokens") {
  const std::vector<Request> trace = shared_prefix_trace();
  const TierRun none = run_engine(0, 0, trace);
  const TierRun dram = run_engine(64, 0, trace);
  const TierRun both = run_engine(2, 64, trace);  // two blocks of host memory: the rest demoted to the file
  REQUIRE(none.tokens.size() == trace.size());
  REQUIRE(dram.tokens.size() == trace.size());
  REQUIRE(both.tokens.size() == trace.size());
  CHECK(none.tier_loads == 0);
  CHECK(dram.tier_loads > 0);
  CHECK(both.tier_loads > 0);
  // Loads replace recomputation: more prompt tokens served from the cache.
  CHECK(dram.cached_tokens > none.cached_tokens);
  CHECK(both.cached_tokens > none.cached_tokens);
  REQUIRE(dram.replica.kv.tiers.size() == 1);
  CHECK(dram.replica.kv.tiers[0].name == "dram");
  CHECK(dram.replica.kv.tiers[0].capacity_blocks == 64);
  REQUIRE(both.replica.kv.tiers.size() == 2);
  CHECK(both.replica.kv.tiers[1].name == "ssd");
  for (const Request& r : trace) {
    INFO("request " << r.id);
    CHECK(dram.tokens.at(r.id) == none.tokens.at(r.id));
    CHECK(both.tokens.at(r.id) == none.tokens.at(r.id));
  }
}

TEST_CASE("replay parity with the engine's KV tiers: the simulator replaying its step log gives its records") {
  const std::vector<Request> trace = shared_prefix_trace();
  for (auto [dram, ssd] : {std::pair{64, 0}, std::pair{2, 64}}) {
    CAPTURE(dram, ssd);
    const TierRun engine = run_engine(dram, ssd, trace);
    REQUIRE(engine.tier_loads > 0);
    Cluster cluster = build_cluster(tiny_replica());
    // The same books; their loads already inside the replayed step times.
    std::vector<KvTierLink> links;
    for (const KvTierConfig& t : engine.replica.kv.tiers) links.push_back({t.name, t.capacity_blocks, 1.0, 1.0, 0});
    cluster.replicas.front().config.kv.tiers = engine.replica.kv.tiers;
    cluster.replicas.front().tiers = std::make_shared<KvTierModel>(links, 1.0, false, true);
    auto model = std::make_shared<ReplayCostModel>(engine.steps, "engine step log");
    cluster.replicas.front().cost_model = model;
    std::vector<Request> scaled = trace;
    for (Request& r : scaled) replay_faster(r, 0, kTimeScale);
    VectorSource source(scaled);
    CollectSink sink;
    Simulator sim(std::move(cluster.replicas), SimOptions{});
    sim.run(source, sink);
    CHECK(model->remaining() == 0);
    CHECK(check_same_records(engine.requests, sink.requests, true) == 0);
  }
}

TEST_CASE("the engine's KV tiers refuse what they do not keep, by name") {
  EngineSettings settings;
  settings.model = "tiny";
  settings.runner.threads = 1;
  settings.runner.kv_offload_dram_bytes = 100;  // less than one block
  CHECK_THROWS_WITH(Engine(settings), Catch::Contains("--kv-offload-dram-gib holds no KV block"));
  EngineSettings pools = settings;
  pools.runner.kv_offload_dram_bytes = std::int64_t{1} << 24;
  pools.roles = {ReplicaRole::prefill, ReplicaRole::decode};
  CHECK_THROWS_WITH(Engine(pools), Catch::Contains("prefill and decode replicas are not built"));
}

}  // namespace twin::test
