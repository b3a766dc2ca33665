// vLLM's start-up check in the simulator's cluster building: a replica whose
// KV cache cannot hold one request of max_model_len is refused in vLLM's
// words, with the largest max_model_len that fits; --max-model-len auto
// lowers it to that; --explain-memory gets the verdict.
#include <catch2/catch.hpp>

#include <string>

#include "sim_test_util.hpp"

using namespace twin;
using namespace twin::test;

namespace {

// Llama-3.1-70B at TP 2 on A100s (80 GB): 24,624 KV tokens against a
// 131,072-token context (issue 39).
ClusterConfig seventy_b_tp2() { return one_group("llama-3.1-70b", "a100-80gb", 2); }

}  // namespace

TEST_CASE("70B at TP 2 on A100s is refused as vLLM refuses to start, naming max_model_len and what fits") {
  const Cluster reported = build_cluster(seventy_b_tp2(), StartUpCheck::report);
  const GroupPlan& g = reported.groups.front();
  const std::int64_t tokens = static_cast<std::int64_t>(g.memory.num_blocks) * g.replica.kv.block_size;
  CHECK(tokens == 24624);
  CHECK(g.replica.scheduler.max_model_len == 131072);
  CHECK_FALSE(g.memory.fit.fits());
  CHECK(g.memory.fit.largest_fitting == tokens);  // whole blocks of the fullest GPU
  try {
    (void)build_cluster(seventy_b_tp2());
    FAIL("expected vLLM's refusal");
  } catch (const UsageError&) {
    FAIL("a cache too small is the memory's fault, a runtime error");
  } catch (const Error& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("llama-3.1-70b"));
    CHECK_THAT(what, Catch::Contains("To serve at least one request with the models's max seq len (131072)"));
    CHECK_THAT(what, Catch::Contains("the estimated maximum model length is 24624"));
    CHECK_THAT(what, Catch::Contains("--max-model-len auto"));
  }
  // What fits passes; one token more does not.
  ClusterConfig fits = seventy_b_tp2();
  fits.overrides.max_model_len = 24624;
  CHECK_NOTHROW(build_cluster(fits));
  fits.overrides.max_model_len = 24625;
  CHECK_THROWS_WITH(build_cluster(fits), Catch::Contains("max seq len (24625)"));
  // Four GPUs hold the whole context.
  CHECK_NOTHROW(build_cluster(one_group("llama-3.1-70b", "a100-80gb", 4)));
}

TEST_CASE("max_model_len auto lowers it to the largest that fits, and no further") {
  ClusterConfig config = seventy_b_tp2();
  config.max_model_len_auto = true;
  const Cluster c = build_cluster(config);
  const GroupPlan& g = c.groups.front();
  CHECK(g.replica.scheduler.max_model_len == 24624);
  CHECK(g.replica.kv.max_model_len == 24624);
  CHECK(c.replicas.front().config.scheduler.max_model_len == 24624);
  CHECK(g.memory.fit.fits());
  CHECK(g.memory.auto_fitted_from == 131072);
  const std::string text = explain_memory_plan(g.memory, "  ");
  CHECK_THAT(text, Catch::Contains("max_model_len lowered from 131072 to 24624"));
  CHECK_THAT(text, Catch::Contains("vLLM start-up check: one request of max_model_len 24624"));
  // Where the context fits, auto keeps it.
  ClusterConfig roomy = one_group("llama-3.1-8b", "h100-80gb");
  roomy.max_model_len_auto = true;
  const Cluster r = build_cluster(roomy);
  CHECK(r.groups.front().replica.scheduler.max_model_len == 131072);
  CHECK(r.groups.front().memory.auto_fitted_from == 0);
}

TEST_CASE("the verdict is printed by explain_memory_plan either way") {
  const Cluster refused = build_cluster(seventy_b_tp2(), StartUpCheck::report);
  CHECK_THAT(explain_memory_plan(refused.groups.front().memory, ""),
             Catch::Contains("max_model_len 131072 needs 20.00 GiB of KV per GPU") &&
                 Catch::Contains("vLLM refuses to start (the largest max_model_len that fits is 24624"));
  const Cluster ok = build_cluster(one_group("llama-3.1-8b", "h100-80gb"));
  CHECK_THAT(explain_memory_plan(ok.groups.front().memory, ""), Catch::Contains("GiB available: ok"));
}

TEST_CASE("the config file's top-level scheduler takes max_model_len auto, a group's does not") {
  const nlohmann::json top = {{"groups", {{{"model", "llama-3.1-70b"}, {"hardware", "a100-80gb"}, {"tp", 2}}}},
                              {"scheduler", {{"max_model_len", "auto"}}}};
  const ClusterConfig parsed = parse_cluster_config(top, "c.json");
  CHECK(parsed.max_model_len_auto);
  CHECK(cluster_config_json(parsed)["scheduler"]["max_model_len"] == "auto");
  CHECK(build_cluster(parsed).groups.front().replica.scheduler.max_model_len == 24624);
  const nlohmann::json minus_one = {{"scheduler", {{"max_model_len", -1}}}};
  CHECK(parse_cluster_config(minus_one, "c.json").max_model_len_auto);
  const nlohmann::json group = {{"groups", {{{"scheduler", {{"max_model_len", "auto"}}}}}}};
  CHECK_THROWS_WITH(parse_cluster_config(group, "c.json"), Catch::Contains("top-level scheduler"));
}
