// Issue 39: plan never ranks a deployment vLLM refuses to start (its KV
// cache cannot hold one request of max_model_len), --max-model-len auto
// serves what fits instead, and simulate's overload flag reaches every
// sweep row and every plan probe.
#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>

#include "planner/plan_html.hpp"
#include "planner/plan_report.hpp"
#include "planner/planner.hpp"
#include "planner/sweep.hpp"
#include "tests/planner/planner_test_util.hpp"

namespace twin {
namespace {

PlanOptions seventy_b_on_a100s() {
  PlanOptions o;
  o.space.model = "llama-3.1-70b";
  o.space.hardware = {"a100-80gb"};
  o.space.tp = {2, 4};
  o.slos = "ttft_p90<=10s,tpot_p90<=200ms";
  o.capacity.probe_requests = 60;
  o.capacity.tolerance = 0.1;
  o.jobs = 2;
  return o;
}

const CandidateResult& at_tp(const PlanResult& p, std::int32_t tp) {
  const auto it = std::find_if(p.candidates.begin(), p.candidates.end(),
                               [&](const CandidateResult& c) { return c.candidate.tp == tp; });
  REQUIRE(it != p.candidates.end());
  return *it;
}

TEST_CASE("plan never ranks 70B at TP 2 on A100s: vLLM would refuse to start it") {
  const PlanResult p = run_plan(test::chat_trace(60, 0.5), seventy_b_on_a100s());
  const CandidateResult& tp2 = at_tp(p, 2);
  CHECK(tp2.status == CandidateStatus::pruned);
  CHECK(tp2.capacity.probes.empty());
  CHECK_THAT(tp2.reason, Catch::Contains("vLLM would refuse to start"));
  CHECK_THAT(tp2.reason, Catch::Contains("max seq len (131072)"));
  CHECK_THAT(tp2.reason, Catch::Contains("the estimated maximum model length is 24624"));
  for (std::size_t i : p.ranking) CHECK(p.candidates[i].candidate.tp != 2);
  REQUIRE(p.chosen >= 0);
  CHECK(p.candidates[static_cast<std::size_t>(p.chosen)].candidate.tp == 4);
  CHECK_THAT(p.chosen_vllm_serve, Catch::Contains("--tensor-parallel-size 4") && Catch::Contains("--max-model-len 131072"));
  // The reason is in plan.json's pruned list and in the HTML table.
  const auto j = plan_json(p, seventy_b_on_a100s());
  REQUIRE(j["pruned"].size() == 1);
  CHECK_THAT(j["pruned"][0]["reason"].get<std::string>(), Catch::Contains("max seq len (131072)"));
  CHECK_THAT(plan_html(p), Catch::Contains("estimated maximum model length is 24624"));
}

TEST_CASE("plan --max-model-len auto serves what fits, and its vllm serve line says so") {
  PlanOptions o = seventy_b_on_a100s();
  o.space.max_model_len = kMaxModelLenAuto;
  const PlanResult p = run_plan(test::chat_trace(60, 0.5), o);
  const CandidateResult& tp2 = at_tp(p, 2);
  const CandidateResult& tp4 = at_tp(p, 4);
  CHECK(tp2.status == CandidateStatus::ok);
  CHECK(tp2.max_model_len == 24624);
  CHECK(tp4.max_model_len == 131072);  // the whole context fits in four GPUs
  REQUIRE(p.chosen >= 0);
  CHECK(p.candidates[static_cast<std::size_t>(p.chosen)].candidate.tp == 2);  // half the GPUs
  CHECK_THAT(p.chosen_vllm_serve, Catch::Contains("--tensor-parallel-size 2") && Catch::Contains("--max-model-len 24624"));
  const auto j = plan_json(p, o);
  CHECK(j["search"]["max_model_len"] == "auto");
  CHECK(j["chosen"]["max_model_len"] == 24624);
  CHECK(j["chosen"]["candidate"]["max_model_len"] == "auto");
  // The round trip keeps the candidate's auto and the resolved length.
  const CandidateResult back = candidate_result_from_json(nlohmann::json::parse(candidate_result_json(tp2).dump()));
  CHECK(back.candidate.max_model_len == kMaxModelLenAuto);
  CHECK(candidate_result_json(back).dump() == candidate_result_json(tp2).dump());
}

TEST_CASE("search files take max_model_len auto") {
  SearchSpace s;
  apply_search_json(s, nlohmann::json{{"max_model_len", "auto"}}, "s.json");
  CHECK(s.max_model_len == kMaxModelLenAuto);
  apply_search_json(s, nlohmann::json{{"max_model_len", 8192}}, "s.json");
  CHECK(s.max_model_len == 8192);
  CHECK_THROWS_WITH(apply_search_json(s, nlohmann::json{{"max_model_len", "most"}}, "s.json"),
                    Catch::Contains("max_model_len"));
}

// One llama-3.1-8b on an A100: 600 chat requests offered at 4 req/s and at
// 40x that; the second is far beyond what it serves.
std::vector<SweepPoint> load_sweep(std::vector<VaryAxis>& axes) {
  ClusterConfig base;
  base.groups.emplace_back();
  base.groups.front().hardware = "a100-80gb";
  base.slos = "ttft_p90<=2s";
  axes = {parse_vary("rate_scale=1,40")};
  check_vary_axes(base, axes);
  SweepOptions o;
  o.jobs = 2;
  return run_sweep(base, axes, test::chat_trace(600, 4.0), o);
}

TEST_CASE("sweep flags an overloaded point in its row, its table and its warnings, as simulate does") {
  std::vector<VaryAxis> axes;
  const std::vector<SweepPoint> points = load_sweep(axes);
  REQUIRE(points.size() == 2);
  REQUIRE(points[0].error.empty());
  REQUIRE(points[1].error.empty());
  CHECK_FALSE(points[0].result.overloaded);
  CHECK(points[1].result.overloaded);
  CHECK_FALSE(points[1].result.pass);  // a growing queue does not meet an SLO, whatever its p90 says
  std::ostringstream csv;
  write_sweep_csv(csv, axes, points);
  const std::string text = csv.str();
  CHECK_THAT(text, Catch::Contains(",preemptions,overloaded,average_power_w,joules_per_output_token,error\n"));
  CHECK_THAT(text, Catch::Contains("\n1,ok,"));
  CHECK_THAT(text, Catch::Contains("\n40,overloaded,"));
  std::ostringstream table;
  print_sweep_table(table, axes, points);
  CHECK_THAT(table.str(), Catch::Contains("OVERLOADED"));
  const std::vector<std::string> warnings = sweep_warnings(axes, points);
  REQUIRE_FALSE(warnings.empty());
  CHECK_THAT(warnings[0], Catch::StartsWith("overloaded: 1 of 2 points (rate_scale=40)"));
}

TEST_CASE("every plan probe carries the overload flag, into plan.json, plan.csv, the table and the HTML") {
  PlanOptions o;
  o.space.hardware = {"a100-80gb"};
  o.space.tp = {1};
  o.slos = "ttft_p90<=5s";
  o.capacity.probe_requests = 600;
  o.jobs = 1;
  // Offered far past one replica's capacity: the doubling search starts at
  // the trace's rate and halves down from overloaded probes.
  o.capacity.search = CapacitySearch::doubling;
  const LoadedTrace trace = test::chat_trace(600, 160.0);
  const CandidateResult r = evaluate_candidate(enumerate_candidates(o.space).front(), trace, o);
  std::size_t overloaded = 0;
  for (const ProbeResult& p : r.capacity.probes) {
    overloaded += p.overloaded;
    if (p.overloaded) CHECK_FALSE(p.pass);
  }
  CHECK(overloaded > 0);
  const auto verify_overloaded =
      std::count_if(r.verify.begin(), r.verify.end(), [](const VerifyRun& v) { return v.result.overloaded; });
  CHECK(overload_count(r).overloaded == overloaded + static_cast<std::size_t>(verify_overloaded));
  const auto j = candidate_result_json(r);
  CHECK(j["overloaded_runs"] == overload_count(r).overloaded);
  std::size_t in_json = 0;
  for (const auto& p : j["probes"]) in_json += p["overloaded"].get<bool>();
  CHECK(in_json == overloaded);
  PlanOptions opts = o;
  const PlanResult plan = assemble_plan(trace, opts, {r});
  std::ostringstream csv, table;
  write_plan_csv(csv, plan);
  print_plan(table, plan);
  CHECK_THAT(csv.str(), Catch::Contains(",planned_rate_rps,overloaded_runs,"));
  CHECK_THAT(table.str(), Catch::Contains("overloaded") &&
                              Catch::Contains(std::to_string(overload_count(r).overloaded) + "/" +
                                              std::to_string(overload_count(r).runs)));
  CHECK_THAT(plan_html(plan), Catch::Contains("<th>overloaded runs</th>") &&
                                  Catch::Contains(std::to_string(overload_count(r).overloaded) + " of "));
}

}  // namespace
}  // namespace twin
