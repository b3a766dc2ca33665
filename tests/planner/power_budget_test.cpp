// plan --max-power-kw (docs/plan.md; --power-budget-w its earlier spelling in W): a candidate whose GPUs at their max
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
  CHECK_THAT(wide.reason, Catch::Contains("--max-power-kw 1.000"));
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
  CHECK_THROWS_WITH(check_plan_options(options(0)), Catch::Contains("--max-power-kw"));
}

TEST_CASE("with an energy price a candidate's cost per hour adds the electricity its cluster check drew") {
  const LoadedTrace trace = test::chat_trace(20, 5.0);
  PlanOptions o = options(1e6);
  const CandidateResult gpus_only = evaluate_candidate(h100(1), trace, o);
  REQUIRE(gpus_only.replicas >= 1);
  CHECK(gpus_only.energy_cost_per_hour == 0);
  CHECK(gpus_only.cost_per_hour == gpus_only.gpu_cost_per_hour);
  o.energy_price_per_kwh = 0.5;
  const CandidateResult priced = evaluate_candidate(h100(1), trace, o);
  REQUIRE(priced.average_power_w > 0);
  CHECK(priced.energy_cost_per_hour == Approx(priced.average_power_w / 1000.0 * 0.5));
  CHECK(priced.cost_per_hour == Approx(priced.gpu_cost_per_hour + priced.energy_cost_per_hour));
  CHECK(priced.cost_per_hour > gpus_only.cost_per_hour);
  const CandidateResult back = candidate_result_from_json(candidate_result_json(priced));
  CHECK(back.energy_cost_per_hour == Approx(priced.energy_cost_per_hour));
  // Every capacity probe carries its energy per token (plan.html's chart).
  for (const ProbeResult& p : priced.capacity.probes) CHECK(p.joules_per_output_token > 0);
  o.energy_price_per_kwh = -1;
  CHECK_THROWS_WITH(check_plan_options(o), Catch::Contains("--energy-price"));
}

}  // namespace twin
