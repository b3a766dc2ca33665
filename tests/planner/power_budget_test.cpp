// plan --power-budget-w (docs/plan.md): a candidate whose GPUs at their max
// board power exceed the budget is pruned before any simulation; one whose
// profile has no power figures cannot be checked against it.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "planner/planner.hpp"
#include "tests/planner/planner_test_util.hpp"

namespace twin {
namespace {

PlanOptions options(double budget_w) {
  PlanOptions o;
  o.space.model = "llama-3.1-8b";
  o.space.hardware = {"h100-80gb"};
  o.slos = "ttft_p90<=2s,tpot_p90<=100ms";
  o.capacity.probe_requests = 100;
  o.capacity.tolerance = 0.1;
  o.space.power_budget_w = budget_w;
  return o;
}

Candidate h100(std::int32_t tp) {
  Candidate c;
  c.model = "llama-3.1-8b";
  c.hardware = "h100-80gb";
  c.tp = tp;
  c.preset = "vllm";
  c.router = "round_robin";
  return c;
}

}  // namespace

TEST_CASE("a power budget prunes the candidates whose GPUs draw more at their cap") {
  const LoadedTrace trace = test::chat_trace(20, 5.0);
  // 700 W per H100: tp 2 needs 1400 W provisioned, over a 1000 W budget.
  const CandidateResult wide = evaluate_candidate(h100(2), trace, options(1000));
  CHECK(wide.status == CandidateStatus::pruned);
  CHECK_THAT(wide.reason, Catch::Contains("--power-budget-w"));
  CHECK_THAT(wide.reason, Catch::Contains("1400 W"));
  CHECK(wide.capacity.probes.empty());  // before any simulation
  CHECK(wide.max_power_per_gpu_w == 700);

  // tp 1 fits the same budget: it is evaluated, and its figures carry power.
  const CandidateResult one = evaluate_candidate(h100(1), trace, options(1000));
  CHECK(one.status != CandidateStatus::pruned);
  REQUIRE(one.replicas >= 1);
  CHECK(one.provisioned_power_w == 700.0 * one.gpus);
  if (one.status == CandidateStatus::ok) {
    CHECK(one.average_power_w > 0);
    CHECK(one.average_power_w <= one.provisioned_power_w);
    CHECK(one.joules_per_output_token > 0);
  }
  // Round trip through plan.json's entry.
  const CandidateResult back = candidate_result_from_json(candidate_result_json(one));
  CHECK(back.provisioned_power_w == one.provisioned_power_w);
}

TEST_CASE("a power budget cannot pass a profile without power figures, and a bad budget is a usage error") {
  nlohmann::ordered_json hw;
  std::ifstream(std::string(TWIN_SOURCE_DIR) + "/hwprofiles/profiles/h100-80gb.json") >> hw;
  hw.erase("power");
  for (const char* key : {"power.idle_w", "power.memory_w", "power.compute_w", "power.max_w"}) hw["sources"].erase(key);
  const auto path = std::filesystem::temp_directory_path() / "twin_power_budget_h100.json";
  std::ofstream(path) << hw.dump(2);
  Candidate c = h100(1);
  c.hardware = path.string();
  const CandidateResult r = evaluate_candidate(c, test::chat_trace(20, 5.0), options(1e6));
  CHECK(r.status == CandidateStatus::pruned);
  CHECK_THAT(r.reason, Catch::Contains("no power figures"));
  std::filesystem::remove(path);

  CHECK_THROWS_AS(check_plan_options(options(-5)), UsageError);
  CHECK_THROWS_WITH(check_plan_options(options(0)), Catch::Contains("--power-budget-w"));
}

}  // namespace twin
