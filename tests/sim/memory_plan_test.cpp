#include <catch2/catch.hpp>

#include <cmath>

#include "models/model_math.hpp"
#include "sim_test_util.hpp"

using namespace twin;
using namespace twin::test;

TEST_CASE("KV blocks follow vLLM's memory plan") {
  ClusterConfig config = one_group("llama-2-7b", "a100-80gb", 1, 1, 1, "fp16");
  Cluster c = build_cluster(config);
  const GroupPlan& g = c.groups.front();
  const double usable = 80e9 * 0.9;
  const double weights = static_cast<double>(weight_bytes(g.model, Dtype::fp16));
  const double block = 16.0 * 524288;  // block size 16, Llama-2-7B fp16 KV per token
  CHECK(g.memory.usable_bytes == Approx(usable));
  CHECK(g.memory.weight_bytes == Approx(weights));
  CHECK(g.memory.block_bytes == Approx(block));
  const double reserve = g.memory.activation_bytes;
  CHECK(reserve > 0.5e9);
  CHECK(reserve < 6e9);
  CHECK(g.memory.num_blocks == static_cast<std::int32_t>(std::floor((usable - weights - reserve) / block)));
  CHECK(c.replicas[0].config.kv.num_blocks == g.memory.num_blocks);
}

TEST_CASE("TP=2 gives each GPU half the weights and half of each block") {
  Cluster one = build_cluster(one_group("llama-2-7b", "a100-80gb", 1, 1, 1, "fp16"));
  Cluster two = build_cluster(one_group("llama-2-7b", "a100-80gb", 2, 1, 1, "fp16"));
  CHECK(two.groups[0].memory.block_bytes == Approx(one.groups[0].memory.block_bytes / 2));
  CHECK(two.groups[0].memory.weight_bytes < 0.55 * one.groups[0].memory.weight_bytes);
  CHECK(two.groups[0].memory.num_blocks > 2 * one.groups[0].memory.num_blocks);
}

TEST_CASE("a model that does not fit is an error with the numbers") {
  try {
    build_cluster(one_group("llama-3.1-70b", "a100-80gb"));
    FAIL("expected an error");
  } catch (const UsageError&) {
    FAIL("not fitting is a runtime error, not a usage error");
  } catch (const Error& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("does not fit"));
    CHECK_THAT(what, Catch::Contains("GiB"));
    CHECK_THAT(what, Catch::Contains("llama-3.1-70b"));
  }
  // Eight GPUs hold it.
  CHECK_NOTHROW(build_cluster(one_group("llama-3.1-70b", "a100-80gb", 8)));
}

TEST_CASE("num_gpu_blocks_override pins the cache size") {
  ClusterConfig config = one_group("llama-3.1-8b", "h100-80gb");
  config.num_gpu_blocks_override = 123;
  Cluster c = build_cluster(config);
  CHECK(c.groups[0].memory.num_blocks == 123);
  CHECK(c.groups[0].memory.overridden);
  CHECK(c.replicas[0].config.kv.num_blocks == 123);
}

TEST_CASE("plan_memory checks its inputs") {
  MemoryPlanInput in;
  in.gpu_memory_bytes = 80e9;
  in.weight_bytes_per_gpu = 10e9;
  in.kv_block_bytes_per_gpu = 1e6;
  in.gpu_memory_utilization = 1.5;
  CHECK_THROWS_AS(plan_memory(in, "x"), UsageError);
  in.gpu_memory_utilization = 0.5;
  CHECK(plan_memory(in, "x").num_blocks == 30000);
  // More blocks than the simulator holds, from an absurd memory size or an
  // override, is an error naming the limit (not hours of setup or an OOM).
  MemoryPlanInput huge = in;
  huge.gpu_memory_bytes = 1e300;
  CHECK_THROWS_WITH(plan_memory(huge, "x"), Catch::Contains("more than the simulator holds (67108864)"));
  in.num_gpu_blocks_override = kMaxSimulatedBlocks + 1;
  CHECK_THROWS_WITH(plan_memory(in, "x"), Catch::Contains(std::to_string(kMaxSimulatedBlocks + 1) + " blocks"));
  in.num_gpu_blocks_override = kMaxSimulatedBlocks;
  CHECK(plan_memory(in, "x").num_blocks == kMaxSimulatedBlocks);
}
