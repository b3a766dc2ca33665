// planner/quiet_cache_run.hpp: a plan's simulation without the prefix
// cache's bookkeeping is the run as configured, figure for figure: skipped
// where nothing is preempted, run again as configured where something is,
// never skipped where requests name prefix content.
#include <catch2/catch.hpp>

#include "metrics/summary_json.hpp"
#include "planner/quiet_cache_run.hpp"
#include "planner/search_space.hpp"
#include "tests/planner/planner_test_util.hpp"

namespace twin {
namespace {

ClusterConfig one_h100() {
  Candidate c;
  c.model = "llama-3.1-8b";
  c.hardware = "h100-80gb";
  c.preset = "vllm";
  c.router = "round_robin";
  return candidate_config(c, 1, "ttft_p90<=2s", 0);
}

// Every figure of the run: not the wall time it took, nor the config it
// echoes (which says whether prefix caching was on).
std::string figures(const QuietCacheRun& r) {
  nlohmann::ordered_json j = summary_to_json(r.sent.run.summary);
  REQUIRE(j.contains("config"));
  j.erase("wall_time_s");
  j.erase("config");
  return j.dump();
}

TEST_CASE("a plan run without the unused prefix cache is the run as configured") {
  const LoadedTrace trace = test::chat_trace(300, 20.0);
  const ClusterConfig config = one_h100();
  const QuietCacheRun kept = run_scaled_trace(config, trace, 0, 1.0, {}, false);
  CHECK_FALSE(kept.cache_skipped);
  const QuietCacheRun quiet = run_scaled_trace(config, trace, 0, 1.0, {}, true);
  CHECK(quiet.cache_skipped);
  CHECK_FALSE(quiet.rerun);
  REQUIRE(kept.sent.run.summary.preemptions == 0);
  CHECK(figures(quiet) == figures(kept));
}

TEST_CASE("a plan run that preempts is run again with the prefix cache as configured") {
  // 200 KV blocks of 16 tokens for a burst of 300 requests: the replica
  // preempts, and a preempted request may hit its own cached blocks.
  const LoadedTrace trace = test::chat_trace(300, 20.0);
  ClusterConfig config = one_h100();
  config.num_gpu_blocks_override = 200;
  const double burst = std::numeric_limits<double>::infinity();
  const QuietCacheRun kept = run_scaled_trace(config, trace, 0, burst, {}, false);
  REQUIRE(kept.sent.run.summary.preemptions > 0);
  const QuietCacheRun quiet = run_scaled_trace(config, trace, 0, burst, {}, true);
  CHECK(quiet.rerun);
  CHECK_FALSE(quiet.cache_skipped);
  CHECK(figures(quiet) == figures(kept));
}

TEST_CASE("a plan run whose requests name prefix content keeps the prefix cache") {
  LoadedTrace trace = test::chat_trace(100, 20.0);
  for (Request& r : trace.requests) {
    r.hash_ids = {1, 2, 3};
    r.hash_block_size = 16;
  }
  const QuietCacheRun run = run_scaled_trace(one_h100(), trace, 0, 1.0, {}, true);
  CHECK_FALSE(run.cache_skipped);
  CHECK_FALSE(run.rerun);
  CHECK(run.sent.run.summary.prefix_cache_hit_rate > 0);
  ClientOptions sessions;
  sessions.sessions = true;
  CHECK_FALSE(run_scaled_trace(one_h100(), test::chat_trace(50, 20.0), 0, 1.0, sessions, true).cache_skipped);
}

}  // namespace
}  // namespace twin
