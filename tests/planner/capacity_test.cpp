// Capacity search on a workload whose answer is known by construction.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "planner/capacity.hpp"
#include "planner/planner.hpp"
#include "sim/run.hpp"
#include "tests/planner/planner_test_util.hpp"

namespace twin {
namespace {

// One replica that prefills exactly one prompt per step (token budget = the
// prompt) and stops after the first token: each request is one step of S ns.
// Below 1/S req/s a constant-rate arrival finds the replica idle (TTFT = S);
// above it the queue grows by (S - 1/r) per request. With TTFT p90 <= 2 S on
// 300 requests the capacity is 1/S within 0.4%.
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

double service_time_s(const ClusterConfig& config) {
  Request r;
  r.prompt_len = kPrompt;
  r.output_len = 1;
  VectorSource source({r});
  const RunResult run = run_simulation(config, source, RunOutputs{});
  REQUIRE(run.summary.completed == 1);
  return run.summary.ttft_ms.mean / 1e3;
}

std::string slo_at(double seconds) {
  return "ttft_p90<=" + std::to_string(static_cast<long long>(std::llround(seconds * 1e6))) + "us";
}

TEST_CASE("capacity of one prefill per step is 1 over the step time") {
  const Candidate c = one_prefill_per_step();
  const double s = service_time_s(candidate_config(c, 1, "", 0));
  REQUIRE(s > 0);
  const LoadedTrace trace = test::constant_trace(300, 2.5 / s, kPrompt, 1);
  CapacityOptions o;
  o.probe_requests = 0;
  o.tolerance = 0.01;
  o.start_rate = arrival_rate(trace);
  const CapacityResult cap = find_capacity(candidate_config(c, 1, slo_at(2 * s), 0), trace, o);
  REQUIRE(cap.feasible);
  CHECK(std::abs(cap.capacity * s - 1.0) <= 0.02);
  CHECK(cap.upper > cap.capacity);
  CHECK(cap.upper - cap.capacity <= 0.01 * cap.capacity + 1e-12);
}

TEST_CASE("a short probe whose burst meets a loose SLO is held to the saturated throughput") {
  // Five requests meet TTFT p90 <= 100 S even all at once, so without a
  // bound every doubling of the rate passes (a capacity of 2^16 x the start
  // rate was reported). A rate above the saturated throughput (1/S here:
  // one request per step) is not sustainable whatever a short probe shows.
  const Candidate c = one_prefill_per_step();
  const double s = service_time_s(candidate_config(c, 1, "", 0));
  REQUIRE(s > 0);
  const LoadedTrace trace = test::constant_trace(5, 0.5 / s, kPrompt, 1);
  CapacityOptions o;
  o.probe_requests = 0;
  o.start_rate = arrival_rate(trace);
  const CapacityResult cap = find_capacity(candidate_config(c, 1, slo_at(100 * s), 0), trace, o);
  REQUIRE(cap.feasible);
  // S is a lone request's step, which pays the engine's host work on top;
  // back-to-back steps hide it behind the GPU (async scheduling,
  // docs/op-costs.md "Host work per step"): about 1.4% here.
  CHECK(std::abs(cap.saturated_rps * s - 1.0) <= 0.02);
  CHECK(cap.capacity <= cap.saturated_rps);
  CHECK(cap.upper > 0);
  // The search from the saturated throughput simulates nothing above it.
  for (const ProbeResult& p : cap.probes) CHECK(p.rate <= cap.saturated_rps);
  // The doubling search probes above it, and such a probe fails.
  o.search = CapacitySearch::doubling;
  const CapacityResult doubled = find_capacity(candidate_config(c, 1, slo_at(100 * s), 0), trace, o);
  REQUIRE(doubled.feasible);
  CHECK(doubled.capacity <= doubled.saturated_rps);
  bool held = false;
  for (const ProbeResult& p : doubled.probes) {
    if (p.rate > doubled.saturated_rps) CHECK_FALSE(p.pass);
    held = held || p.above_saturation;
  }
  CHECK(held);
}

TEST_CASE("plan sizes the constant-rate trace to ceil of rate over capacity and verifies it") {
  const Candidate c = one_prefill_per_step();
  const double s = service_time_s(candidate_config(c, 1, "", 0));
  const LoadedTrace trace = test::constant_trace(300, 2.5 / s, kPrompt, 1);
  PlanOptions o;
  o.space.model = "small";
  o.space.hardware = {"a100-80gb"};
  o.space.tp = {1};
  o.space.max_num_batched_tokens = {kPrompt};
  o.space.routers = {"round_robin"};
  o.slos = slo_at(2 * s);
  o.capacity.probe_requests = 0;
  o.capacity.tolerance = 0.01;
  o.jobs = 1;
  const PlanResult plan = run_plan(trace, o);
  REQUIRE(plan.chosen == 0);
  const CandidateResult& r = plan.candidates[0];
  CHECK(r.status == CandidateStatus::ok);
  CHECK(std::abs(r.capacity.capacity * s - 1.0) <= 0.02);
  CHECK(r.replicas_estimated == 3);
  CHECK(r.replicas == 3);
  CHECK(r.gpus == 3);
  CHECK(r.cost_per_hour == Approx(3 * r.price_per_gpu_hour));
  REQUIRE(r.verify.size() == 1);
  CHECK(r.verify.front().result.pass);
  // Every request finds its replica idle: TTFT p90 is the step time.
  CHECK(r.latency_ms == Approx(s * 1e3).epsilon(1e-6));
  CHECK(plan.pareto == std::vector<std::size_t>{0});
}

TEST_CASE("a probe rescales arrivals to the asked rate and keeps the pattern") {
  LoadedTrace t = test::chat_trace(50, 4.0);
  ScaledTraceSource src(t, 10, 8.0 / arrival_rate(t, 10));
  Request r;
  std::vector<Time> got;
  while (src.next(r)) got.push_back(r.arrival);
  REQUIRE(got.size() == 10);
  CHECK(got.front() == 0);
  CHECK(9.0 / to_seconds(got.back()) == Approx(8.0).epsilon(1e-6));
  // Ratios of gaps are kept.
  const double g1 = static_cast<double>(t.requests[2].arrival - t.requests[1].arrival);
  const double g2 = static_cast<double>(t.requests[5].arrival - t.requests[4].arrival);
  CHECK(static_cast<double>(got[2] - got[1]) / static_cast<double>(got[5] - got[4]) == Approx(g1 / g2).epsilon(1e-6));
}

TEST_CASE("a probe scales the clients' patience with the arrivals, as run and validate do") {
  LoadedTrace t = test::chat_trace(4, 4.0);
  for (Request& r : t.requests) r.cancel_time = r.arrival + 2 * kNsPerSec;
  const Time first = t.requests.front().arrival;
  ScaledTraceSource faster(t, 0, 2.0);
  Request r;
  for (const Request& original : t.requests) {
    REQUIRE(faster.next(r));
    CHECK(r.arrival == std::llround(static_cast<double>(original.arrival - first) / 2.0));
    CHECK(r.cancel_time - r.arrival == kNsPerSec);
  }
  // All at once (no rate to scale): patience kept.
  ScaledTraceSource burst(t, 0, std::numeric_limits<double>::infinity());
  REQUIRE(burst.next(r));
  REQUIRE(burst.next(r));
  CHECK(r.arrival == 0);
  CHECK(r.cancel_time == 2 * kNsPerSec);
}

}  // namespace
}  // namespace twin
