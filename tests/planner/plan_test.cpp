// Plan behaviour: monotonicity, pruning, an SLO nobody meets, exact round trip.
#include <catch2/catch.hpp>

#include <cmath>

#include "base/error.hpp"
#include "planner/plan_html.hpp"
#include "planner/plan_report.hpp"
#include "metrics/svg_chart.hpp"
#include "planner/planner.hpp"
#include "tests/planner/planner_test_util.hpp"

namespace twin {
namespace {

PlanOptions two_gpu_kinds(const std::string& slos) {
  PlanOptions o;
  o.space.model = "llama-3.1-8b";
  o.space.hardware = {"a100-80gb", "h100-80gb"};
  o.space.tp = {1};
  o.slos = slos;
  o.capacity.probe_requests = 150;
  o.capacity.tolerance = 0.05;
  o.jobs = 2;
  return o;
}

const std::string kTight = "ttft_p90<=150ms,tpot_p90<=25ms";
const std::string kLoose = "ttft_p90<=2s,tpot_p90<=100ms";

double chosen_cost(const PlanResult& p) {
  REQUIRE(p.chosen >= 0);
  return p.candidates[static_cast<std::size_t>(p.chosen)].cost_per_hour;
}

TEST_CASE("a looser SLO never costs more and a higher rate never costs less") {
  const LoadedTrace trace = test::chat_trace(300, 40.0);
  const PlanResult tight = run_plan(trace, two_gpu_kinds(kTight));
  const PlanResult loose = run_plan(trace, two_gpu_kinds(kLoose));
  CHECK(chosen_cost(loose) <= chosen_cost(tight));
  for (std::size_t i = 0; i < tight.candidates.size(); ++i) {
    CHECK(loose.candidates[i].capacity.capacity >= tight.candidates[i].capacity.capacity);
  }
  const PlanResult faster = run_plan(test::scale_rate(trace, 10.0), two_gpu_kinds(kLoose));
  CHECK(chosen_cost(faster) >= chosen_cost(loose));
  CHECK(faster.candidates[static_cast<std::size_t>(faster.chosen)].replicas >= 2);
}

TEST_CASE("a target rate sizes the plan for it: the trace replayed at it, every cost per token at it") {
  const LoadedTrace trace = test::chat_trace(300, 40.0);
  const double trace_rate = arrival_rate(trace);
  const PlanResult base = run_plan(trace, two_gpu_kinds(kLoose));
  CHECK_FALSE(base.rate_is_target);
  CHECK(base.planned_rate == trace_rate);
  PlanOptions o = two_gpu_kinds(kLoose);
  o.target_rate = 10 * trace_rate;
  const PlanResult grown = run_plan(trace, o);
  CHECK(grown.rate_is_target);
  CHECK(grown.planned_rate == o.target_rate);
  CHECK(grown.trace_rate == trace_rate);
  REQUIRE(grown.chosen >= 0);
  CHECK(chosen_cost(grown) >= chosen_cost(base));
  for (const CandidateResult& c : grown.candidates) {
    if (c.status != CandidateStatus::ok) continue;
    INFO(candidate_label(c.candidate));
    // The search starts below the saturated throughput, whatever the rate planned for.
    CHECK(c.capacity.probes.front().rate == Approx(c.capacity.saturated_rps / (1 + o.capacity.tolerance)).epsilon(1e-12));
    CHECK(c.verify.back().result.rate == o.target_rate);     // the cluster check is judged at it
    CHECK(c.replicas >= static_cast<std::int32_t>(std::ceil(o.target_rate / c.capacity.capacity - 1e-9)));
    CHECK(c.cost_per_m_output_tokens ==
          Approx(c.cost_per_hour / (o.target_rate * grown.mean_output_tokens * 3600) * 1e6).epsilon(1e-12));
  }
  // Planning for 10x is planning on the trace replayed 10x faster by hand
  // (up to the nanosecond rounding of the arrivals): the same deployment.
  const PlanResult by_hand = run_plan(test::scale_rate(trace, 10.0), two_gpu_kinds(kLoose));
  REQUIRE(by_hand.chosen >= 0);
  CHECK(by_hand.chosen == grown.chosen);
  const auto& a = grown.candidates[static_cast<std::size_t>(grown.chosen)];
  const auto& b = by_hand.candidates[static_cast<std::size_t>(by_hand.chosen)];
  CHECK(a.replicas == b.replicas);
  CHECK(a.replicas >= 2);
  CHECK(a.capacity.capacity == Approx(b.capacity.capacity).epsilon(0.06));
  o.target_rate = -1;
  CHECK_THROWS_AS(check_plan_options(o), UsageError);
}

TEST_CASE("the chosen deployment comes with its vllm serve line, and costs at capacity tell candidates apart") {
  PlanOptions o = two_gpu_kinds(kLoose);
  o.space.tp = {1, 2};
  o.space.max_num_batched_tokens = {2048};
  const PlanResult p = run_plan(test::chat_trace(200, 20.0), o);
  REQUIRE(p.chosen >= 0);
  const CandidateResult& c = p.candidates[static_cast<std::size_t>(p.chosen)];
  CHECK_THAT(p.chosen_vllm_serve, Catch::StartsWith("vllm serve meta-llama/Llama-3.1-8B --tensor-parallel-size " +
                                                    std::to_string(c.candidate.tp)));
  CHECK_THAT(p.chosen_vllm_serve, Catch::Contains("--max-num-batched-tokens 2048"));
  CHECK_THAT(p.chosen_vllm_serve, Catch::Contains("--max-model-len 131072"));
  CHECK_THAT(p.chosen_vllm_serve, Catch::Contains("--enable-prefix-caching"));
  // At the trace's rate every one-replica, one-GPU candidate of a kind costs
  // the same per token whatever its capacity; at capacity they differ, and
  // the figure is the replica's price over what it serves at capacity.
  for (const CandidateResult& r : p.candidates) {
    if (!r.capacity.feasible) continue;
    const double tokens_per_hour = r.capacity.capacity * p.mean_output_tokens * 3600;
    CHECK(r.cost_per_m_output_tokens_at_capacity ==
          Approx(r.gpus_per_replica * r.price_per_gpu_hour / tokens_per_hour * 1e6).epsilon(0.02));
  }
}

TEST_CASE("plan.html is one self-contained page: the answer, a latency chart per SLO with its line, the Pareto, the table") {
  // The tight SLO: the capacities lie below the saturated throughput, so
  // each candidate's search probes several rates (a curve, not a point).
  PlanOptions o = two_gpu_kinds(kTight);
  const PlanResult p = run_plan(test::chat_trace(200, 20.0), o);
  REQUIRE(p.chosen >= 0);
  const std::string html = plan_html(p);
  const auto count = [&](const std::string& what) {
    std::size_t n = 0;
    for (std::size_t at = html.find(what); at != std::string::npos; at = html.find(what, at + 1)) ++n;
    return n;
  };
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(count("<svg") == 4);  // ttft_p90 and tpot_p90 against load, the Pareto, J/token against throughput
  CHECK(count("<svg") == count("</svg>"));
  CHECK(count("class=\"slo\"") == 2);
  // A curve in each latency chart for every candidate probed at two rates or
  // more (one whose capacity is within the tolerance of its saturated
  // throughput takes one probe: a point).
  std::size_t curves = 0;
  for (const CandidateResult& c : p.candidates) curves += c.capacity.probes.size() >= 2;
  CHECK(curves >= 1);
  CHECK(count("class=\"series\"") >= 2 * curves);
  CHECK(count("<tr class=\"chosen\">") == 1);
  CHECK(html.find(xml_escape(p.chosen_vllm_serve)) != std::string::npos);
  // Nothing to fetch: no scripts, no links, no external images or fonts.
  for (const char* banned : {"<script", "href=", "src=", "url(", "@import"}) {
    INFO(banned);
    CHECK(html.find(banned) == std::string::npos);
  }
  CHECK(plan_html(p) == html);  // same plan, same bytes
}

TEST_CASE("candidates that cannot run are pruned with the reason") {
  PlanOptions o = two_gpu_kinds(kLoose);
  const LoadedTrace trace = test::chat_trace(20, 5.0);
  Candidate big;
  big.model = "llama-3.1-70b";
  big.hardware = "a100-80gb";
  big.preset = "vllm";
  big.router = "round_robin";
  const CandidateResult too_big = evaluate_candidate(big, trace, o);
  CHECK(too_big.status == CandidateStatus::pruned);
  CHECK_THAT(too_big.reason, Catch::Contains("llama-3.1-70b"));
  CHECK(too_big.capacity.probes.empty());

  Candidate odd = big;
  odd.model = "llama-3.1-8b";
  odd.tp = 3;  // 32 heads, 8 KV heads
  const CandidateResult bad_tp = evaluate_candidate(odd, trace, o);
  CHECK(bad_tp.status == CandidateStatus::pruned);
  CHECK_THAT(bad_tp.reason, Catch::Contains("tp"));

  o.space.max_gpus = 2;
  Candidate wide = odd;
  wide.tp = 4;
  const CandidateResult too_wide = evaluate_candidate(wide, trace, o);
  CHECK(too_wide.status == CandidateStatus::pruned);
  CHECK_THAT(too_wide.reason, Catch::Contains("--max-gpus"));
}

TEST_CASE("an SLO no candidate meets is an answer with the closest candidates and their floors") {
  PlanOptions o = two_gpu_kinds("ttft_p90<=1ms");
  o.space.tp = {1, 3};  // tp=3 is pruned and never listed as close
  o.capacity.max_bracket_steps = 4;
  const LoadedTrace trace = test::chat_trace(60, 5.0);
  const PlanResult p = run_plan(trace, o);
  CHECK(p.chosen < 0);
  CHECK(p.ranking.empty());
  REQUIRE(p.closest.size() == 2);
  for (std::size_t i : p.closest) {
    const CandidateResult& c = p.candidates[i];
    CHECK(c.status == CandidateStatus::slo_unmet);
    REQUIRE(c.has_floor);
    CHECK(c.floor.ttft_ms > 1.0);  // the floor is what rules it out
    CHECK(c.floor.prompt_len == p.prompt_len_for_floor);
  }
  // H100 prefills faster than A100: it is the closer miss.
  CHECK(p.candidates[p.closest.front()].candidate.hardware == "h100-80gb");
  std::ostringstream out;
  print_plan(out, p);
  CHECK_THAT(out.str(), Catch::Contains("No candidate meets the SLOs"));
  CHECK_THAT(out.str(), Catch::Contains("zero-load floor"));
}

TEST_CASE("budget and GPU limits exclude candidates from the choice") {
  PlanOptions o = two_gpu_kinds(kLoose);
  o.space.budget = 0.01;
  const PlanResult p = run_plan(test::chat_trace(100, 20.0), o);
  CHECK(p.chosen < 0);
  for (const auto& c : p.candidates) CHECK(c.status == CandidateStatus::over_budget);
}

TEST_CASE("candidate results survive the JSON round trip exactly") {
  PlanOptions o = two_gpu_kinds(kLoose);
  o.space.hardware = {"h100-80gb"};
  const PlanResult p = run_plan(test::chat_trace(100, 20.0), o);
  const auto j = candidate_result_json(p.candidates[0]);
  const CandidateResult back = candidate_result_from_json(nlohmann::json::parse(j.dump()));
  CHECK(candidate_result_json(back).dump() == j.dump());
  CHECK(back.capacity.capacity == p.candidates[0].capacity.capacity);
}

TEST_CASE("search files check every key") {
  SearchSpace s;
  CHECK_THROWS_WITH(apply_search_json(s, nlohmann::json::parse(R"({"tpp": [1]})"), "s.json"),
                    Catch::Contains("tpp") && Catch::Contains("unknown key"));
  CHECK_THROWS_AS(apply_search_json(s, nlohmann::json::parse(R"({"tp": "two"})"), "s.json"), UsageError);
  apply_search_json(s, nlohmann::json::parse(R"({"hardware": "h200", "tp": [1, 2], "max_num_batched_tokens": [512, 2048]})"), "s.json");
  CHECK(enumerate_candidates(s).size() == 4);
  s.hardware = {"no-such-gpu"};
  CHECK_THROWS_AS(check_search_space(s), UsageError);
}

TEST_CASE("search files name the file and key of an unknown name, quoting a long one briefly") {
  SearchSpace s;
  CHECK_THROWS_WITH(apply_search_json(s, nlohmann::json::parse(R"({"preset": ["vllm", "vl-lm"]})"), "s.json"),
                    Catch::StartsWith("s.json: preset: unknown scheduler preset 'vl-lm'"));
  CHECK_THROWS_WITH(apply_search_json(s, nlohmann::json::parse(R"({"model": "t"})"), "s.json"),
                    Catch::StartsWith("s.json: model: unknown model 't'"));
  CHECK_THROWS_WITH(apply_search_json(s, nlohmann::json::parse(R"({"hardware": ["h200", "h2000"]})"), "s.json"),
                    Catch::StartsWith("s.json: hardware: unknown hardware 'h2000'"));
  CHECK_THROWS_WITH(apply_search_json(s, nlohmann::json::parse(R"({"router": "fastest"})"), "s.json"),
                    Catch::StartsWith("s.json: router: unknown router policy 'fastest'"));
  CHECK_THROWS_WITH(apply_search_json(s, nlohmann::json::parse(R"({"dtype": "fp65536"})"), "s.json"),
                    Catch::StartsWith("s.json: dtype: unknown dtype"));
  try {
    apply_search_json(s, nlohmann::json{{std::string(50000, 'k'), 1}}, "s.json");
    FAIL("a long unknown key was accepted");
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()).size() < 1000);
  }
}

}  // namespace
}  // namespace twin
