// Issue 45's faster plan: the capacity search down from the saturated
// throughput (stops within its tolerance of the SLO boundary, with fewer
// probes than the doubling search), early rejection of a candidate whose SLO
// is out of reach at zero load (with the reason, and the same verdict the
// search reaches), and the same bytes on any thread count.
#include <catch2/catch.hpp>

#include <cmath>
#include <sstream>

#include "planner/capacity.hpp"
#include "planner/plan_report.hpp"
#include "planner/planner.hpp"
#include "planner/slo_reach.hpp"
#include "sim/run.hpp"
#include "tests/planner/planner_test_util.hpp"

namespace twin {
namespace {

// One prefill of kPrompt tokens per step, one output token: each request is
// one step of S, so the capacity is 1/S (capacity_test.cpp).
constexpr std::int32_t kPrompt = 512;

Candidate one_prefill_per_step() {
  Candidate c;
  c.model = "small";
  c.hardware = "a100-80gb";
  c.preset = "vllm";
  c.router = "round_robin";
  c.max_num_batched_tokens = kPrompt;
  return c;
}

double step_s() {
  Request r;
  r.prompt_len = kPrompt;
  r.output_len = 1;
  VectorSource source({r});
  const RunResult run = run_simulation(candidate_config(one_prefill_per_step(), 1, "", 0), source, RunOutputs{});
  REQUIRE(run.summary.completed == 1);
  return run.summary.ttft_ms.mean / 1e3;
}

std::string ttft_p90_at(double seconds) {
  return "ttft_p90<=" + std::to_string(static_cast<long long>(std::llround(seconds * 1e6))) + "us";
}

bool probed_pass_at(const CapacityResult& cap, double rate) {
  for (const ProbeResult& p : cap.probes) {
    if (p.rate == rate) return p.pass;
  }
  return false;
}

TEST_CASE("the search from the saturated throughput stops within its tolerance of the SLO boundary") {
  const double s = step_s();
  const LoadedTrace trace = test::constant_trace(300, 2.5 / s, kPrompt, 1);
  const ClusterConfig config = candidate_config(one_prefill_per_step(), 1, ttft_p90_at(2 * s), 0);
  CapacityOptions o;
  o.probe_requests = 0;
  o.tolerance = 0.01;
  o.start_rate = arrival_rate(trace);
  const CapacityResult fast = find_capacity(config, trace, o);
  REQUIRE(fast.feasible);
  REQUIRE(fast.saturated_rps > 0);
  // The capacity is a rate that passed, the upper end a rate that failed or
  // the saturated throughput (nothing above it passes), and they are within
  // the tolerance of each other: the boundary lies between them.
  CHECK(probed_pass_at(fast, fast.capacity));
  CHECK(fast.upper > fast.capacity);
  CHECK(fast.upper - fast.capacity <= 0.01 * fast.capacity * (1 + 1e-9));
  bool upper_failed = fast.upper == fast.saturated_rps;
  for (const ProbeResult& p : fast.probes) {
    CHECK(p.rate <= fast.saturated_rps);  // nothing above it is simulated
    CHECK_FALSE(p.above_saturation);
    if (p.rate == fast.upper) upper_failed = !p.pass;
  }
  CHECK(upper_failed);
  CHECK(std::abs(fast.capacity * s - 1.0) <= 0.02);

  // The earlier search finds the same boundary with more probes.
  o.search = CapacitySearch::doubling;
  const CapacityResult slow = find_capacity(config, trace, o);
  REQUIRE(slow.feasible);
  CHECK(fast.probes.size() < slow.probes.size());
  CHECK(std::abs(fast.capacity - slow.capacity) <= 0.01 * std::max(fast.capacity, slow.capacity) * (1 + 1e-9) +
                                                        std::max(fast.upper - fast.capacity, slow.upper - slow.capacity));
}

TEST_CASE("a capacity within the tolerance of the saturated throughput takes one probe") {
  // A loose SLO: every rate up to the saturated throughput passes.
  const double s = step_s();
  const LoadedTrace trace = test::constant_trace(200, 0.5 / s, kPrompt, 1);
  CapacityOptions o;
  o.probe_requests = 0;
  o.tolerance = 0.05;
  o.start_rate = arrival_rate(trace);
  const CapacityResult cap = find_capacity(candidate_config(one_prefill_per_step(), 1, ttft_p90_at(100 * s), 0), trace, o);
  REQUIRE(cap.feasible);
  REQUIRE(cap.probes.size() == 1);
  CHECK(cap.capacity == Approx(cap.saturated_rps / 1.05).epsilon(1e-12));
  CHECK(cap.upper == cap.saturated_rps);
}

PlanOptions small_plan(const std::string& slos) {
  PlanOptions o;
  o.space.model = "small";
  o.space.hardware = {"a100-80gb", "h100-80gb"};
  o.space.tp = {1};
  o.space.max_num_batched_tokens = {kPrompt};
  o.space.routers = {"round_robin"};
  o.slos = slos;
  o.capacity.probe_requests = 0;
  o.capacity.tolerance = 0.02;
  o.jobs = 1;
  return o;
}

TEST_CASE("a candidate whose SLO is below its zero-load latency is rejected before any probe, with the reason") {
  const double s = step_s();  // the a100's step; the h100's is shorter
  const LoadedTrace trace = test::constant_trace(200, 0.5 / s, kPrompt, 1);
  const PlanOptions o = small_plan(ttft_p90_at(0.5 * s));
  const CandidateResult a100 = evaluate_candidate(plan_candidates(o)[0], trace, o);
  REQUIRE(a100.candidate.hardware == "a100-80gb");
  CHECK(a100.status == CandidateStatus::slo_unmet);
  CHECK(a100.rejected_before_probing);
  CHECK(a100.capacity.probes.empty());
  CHECK(a100.verify.empty());
  CHECK_THAT(a100.reason, Catch::Contains("cannot meet ttft_p90<=") && Catch::Contains("at any load") &&
                              Catch::Contains("512 tokens"));
  CHECK(a100.zero_load_ratio > 1.9);

  // The verdict the probes reach: the earlier search, which rejects nothing
  // early, finds no passing rate on the same candidate.
  PlanOptions doubling = o;
  doubling.capacity.search = CapacitySearch::doubling;
  doubling.capacity.max_bracket_steps = 3;
  const CandidateResult probed = evaluate_candidate(plan_candidates(o)[0], trace, doubling);
  CHECK_FALSE(probed.rejected_before_probing);
  CHECK(probed.status == CandidateStatus::slo_unmet);
  CHECK_FALSE(probed.capacity.probes.empty());

  // The plan says so: stdout's list and plan.json's flag.
  const PlanResult plan = run_plan(trace, o);
  std::ostringstream out;
  print_plan(out, plan);
  CHECK_THAT(out.str(), Catch::Contains("Rejected before any probe") && Catch::Contains("cannot meet ttft_p90<="));
  CHECK_THAT(out.str(), Catch::Contains("tolerance 2.0%"));
  const auto j = plan_json(plan, o);
  CHECK(j["candidates"][0]["rejected_before_probing"] == true);
  CHECK(j["method"]["capacity_search"] == "from_saturation");
  const CandidateResult back = candidate_result_from_json(nlohmann::json::parse(j["candidates"][0].dump()));
  CHECK(candidate_result_json(back).dump() == j["candidates"][0].dump());
}

TEST_CASE("a reachable SLO, or one a loaded request could beat, is left to the search") {
  const double s = step_s();
  LoadedTrace trace = test::constant_trace(200, 0.5 / s, kPrompt, 1);
  const ClusterConfig reachable = candidate_config(one_prefill_per_step(), 1, ttft_p90_at(1.05 * s), 0);
  CHECK_FALSE(unreachable_slo(reachable, trace, 0, parse_slos(ttft_p90_at(1.05 * s)), {}));
  const std::vector<Slo> tight = parse_slos(ttft_p90_at(0.5 * s));
  const ClusterConfig config = candidate_config(one_prefill_per_step(), 1, ttft_p90_at(0.5 * s), 0);
  CHECK(unreachable_slo(config, trace, 0, tight, {}));
  // Prompts named by hash ids may hit the prefix cache, and sessions resend
  // earlier turns: a loaded request can beat a lone one, so no bound.
  ClientOptions sessions;
  sessions.sessions = true;
  CHECK_FALSE(unreachable_slo(config, trace, 0, tight, sessions));
  trace.requests[7].hash_ids = {1, 2};
  trace.requests[7].hash_block_size = 256;
  CHECK_FALSE(unreachable_slo(config, trace, 0, tight, {}));
  // An E2E SLO is left to the search.
  CHECK_FALSE(unreachable_slo(config, test::constant_trace(200, 0.5 / s, kPrompt, 1), 0,
                              parse_slos("e2el_p90<=1us"), {}));
}

TEST_CASE("a TPOT below a lone decode step is rejected before any probe") {
  PlanOptions o;
  o.space.model = "llama-3.1-8b";
  o.space.hardware = {"a100-80gb", "h100-80gb"};
  o.space.tp = {1};
  o.slos = "tpot_p99<=8ms";  // a lone decode: about 10.9 ms on an A100, 6.6 ms on an H100
  o.capacity.probe_requests = 100;
  o.verify_requests = 100;
  o.jobs = 1;
  const LoadedTrace trace = test::chat_trace(100, 2.0);
  const auto candidates = plan_candidates(o);
  const CandidateResult a100 = evaluate_candidate(candidates[0], trace, o);
  CHECK(a100.rejected_before_probing);
  CHECK_THAT(a100.reason, Catch::Contains("cannot meet tpot_p99<=8ms at any load") && Catch::Contains("lone decode step"));
  const ClusterConfig h100 = candidate_config(candidates[1], 1, o.slos, 0);
  CHECK_FALSE(unreachable_slo(h100, trace, 100, parse_slos(o.slos), {}));
}

TEST_CASE("a plan with early rejections gives the same bytes on 1 and 2 threads") {
  const LoadedTrace trace = test::chat_trace(200, 15.0);
  PlanOptions o;
  o.space.model = "llama-3.1-8b";
  o.space.hardware = {"h100-80gb", "a100-80gb"};
  o.space.tp = {1, 2};
  o.space.max_num_batched_tokens = {1024, 4096};
  o.slos = "ttft_p90<=1s,tpot_p90<=9ms";  // every A100 TP 1 is rejected early
  o.capacity.probe_requests = 120;
  o.capacity.tolerance = 0.05;
  o.jobs = 1;
  const PlanResult one = run_plan(trace, o);
  o.jobs = 2;
  const PlanResult two = run_plan(trace, o);
  std::size_t rejected = 0;
  for (const auto& c : one.candidates) rejected += c.rejected_before_probing;
  CHECK(rejected == 2);
  CHECK(plan_json(one, o).dump() == plan_json(two, o).dump());
  std::ostringstream a, b;
  print_plan(a, one);
  print_plan(b, two);
  CHECK(a.str() == b.str());
}

}  // namespace
}  // namespace twin
