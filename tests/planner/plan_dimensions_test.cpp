// plan's dimensions of #19 (docs/plan.md): expert parallelism, the
// prefill:decode split and the host DRAM KV tier, enumerated, built into
// cluster configs, costed by their GPUs, and read from search files.
#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "planner/planner.hpp"
#include "planner/search_space.hpp"
#include "planner/sweep.hpp"
#include "planner/vllm_command.hpp"
#include "tests/planner/planner_test_util.hpp"
#include "tests/support/run_cli.hpp"

namespace twin {
namespace {

SearchSpace one_kind() {
  SearchSpace s;
  s.hardware = {"h100-80gb"};
  s.tp = {1};
  return s;
}

// Long prompts, short outputs: where disaggregation pays at a tight SLO.
LoadedTrace long_prompts(std::int32_t n, double rate) {
  GeneratorOptions g;
  g.max_requests = n;
  g.rate = rate;
  g.prompt = "lognormal:median=6000:sigma=0.5:max=16000";
  g.output = "lognormal:median=200:sigma=0.6:max=1000";
  g.seed = 1;
  TraceGenerator gen(g);
  LoadedTrace t;
  t.path = "long";
  Request r;
  while (gen.next(r)) t.requests.push_back(r);
  return t;
}

const CandidateResult& by_label(const PlanResult& p, const std::string& label) {
  for (const CandidateResult& c : p.candidates)
    if (candidate_label(c.candidate) == label) return c;
  FAIL("no candidate " << label);
  return p.candidates.front();
}

}  // namespace

TEST_CASE("plan enumerates EP, prefill:decode splits and DRAM tiers, and builds their clusters") {
  SearchSpace s = one_kind();
  s.ep = {1, 2};
  s.pd = {{0, 0}, {1, 2}};
  s.kv_dram_gib = {0, 64};
  const std::vector<Candidate> all = enumerate_candidates(s);
  REQUIRE(all.size() == 8);
  CHECK(candidate_label(all[0]) == "h100-80gb tp=1 vllm least_outstanding");
  CHECK(candidate_label(all[7]) == "h100-80gb tp=1 ep=2 pd=1:2 dram=64GiB vllm least_outstanding");

  const Candidate& c = all[7];
  CHECK(c.disaggregated());
  CHECK(c.replicas_per_unit() == 3);
  const ClusterConfig three_units = candidate_config(c, 3, "ttft_p90<=1s", 0);
  REQUIRE(three_units.groups.size() == 2);
  CHECK(three_units.groups[0].role == "prefill");
  CHECK(three_units.groups[0].count == 3);
  CHECK(three_units.groups[1].role == "decode");
  CHECK(three_units.groups[1].count == 6);
  CHECK(three_units.groups[1].ep == 2);
  REQUIRE(three_units.kv_tiers.size() == 1);
  CHECK(three_units.kv_tiers[0].name == "dram");
  CHECK(three_units.kv_tiers[0].capacity_gib == 64);
  const ClusterConfig plain = candidate_config(all[0], 2, "ttft_p90<=1s", 0);
  REQUIRE(plain.groups.size() == 1);
  CHECK(plain.groups[0].role == "mixed");
  CHECK(plain.kv_tiers.empty());

  // The JSON of a candidate carries the new keys only where searched, and
  // results travel between MPI ranks with them.
  CHECK_FALSE(candidate_json(all[0]).contains("ep"));
  CHECK_FALSE(candidate_json(all[0]).contains("prefill_replicas"));
  CandidateResult r;
  r.candidate = c;
  const CandidateResult back = candidate_result_from_json(candidate_result_json(r));
  CHECK(back.candidate.ep == 2);
  CHECK(back.candidate.prefill == 1);
  CHECK(back.candidate.decode == 2);
  CHECK(back.candidate.kv_dram_gib == 64);
  CHECK(candidate_result_json(back).dump() == candidate_result_json(r).dump());
}

TEST_CASE("prefill:decode splits and the new search keys are checked, naming the flag or the key") {
  CHECK(parse_pd_split("none", "--pd") == std::pair<std::int32_t, std::int32_t>{0, 0});
  CHECK(parse_pd_split("0", "--pd") == std::pair<std::int32_t, std::int32_t>{0, 0});
  CHECK(parse_pd_split("2:3", "--pd") == std::pair<std::int32_t, std::int32_t>{2, 3});
  for (const char* bad : {"2", "2:", ":3", "0:1", "1:0", "a:b", "1:2:3", "-1:2", ""}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH(parse_pd_split(bad, "--pd"), Catch::Contains("--pd") && Catch::Contains("P:D"));
  }
  SearchSpace s;
  apply_search_json(s, nlohmann::json::parse(R"({"ep": [1, 4], "pd": ["none", "1:1"], "kv_dram_gib": [0, 128]})"),
                    "s.json");
  CHECK(s.ep == std::vector<std::int32_t>{1, 4});
  CHECK(s.pd.size() == 2);
  CHECK(s.kv_dram_gib == std::vector<double>{0, 128});
  auto bad = [](const std::string& text) {
    SearchSpace x;
    apply_search_json(x, nlohmann::json::parse(text), "s.json");
  };
  CHECK_THROWS_WITH(bad(R"({"pd": ["1-1"]})"), Catch::Contains("s.json") && Catch::Contains("pd"));
  CHECK_THROWS_WITH(bad(R"({"ep": [0]})"), Catch::Contains("s.json: ep"));
  CHECK_THROWS_WITH(bad(R"({"kv_dram_gib": [-1]})"), Catch::Contains("s.json: kv_dram_gib"));
}

TEST_CASE("plan searches EP: a model that fits only with experts split is pruned at ep 1 and costed per GPU") {
  PlanOptions o;
  o.space = one_kind();
  o.space.model = "mixtral-8x7b";
  o.space.ep = {1, 2};
  o.slos = "ttft_p90<=2s,tpot_p90<=200ms";
  o.capacity.probe_requests = 60;
  o.capacity.tolerance = 0.1;
  o.verify_requests = 60;
  o.jobs = 1;
  const PlanResult p = run_plan(test::chat_trace(60, 2.0), o);
  REQUIRE(p.candidates.size() == 2);
  const CandidateResult& ep1 = p.candidates[0];
  const CandidateResult& ep2 = p.candidates[1];
  CHECK(ep1.status == CandidateStatus::pruned);
  CHECK_THAT(ep1.reason, Catch::Contains("does not fit"));
  REQUIRE(ep2.status == CandidateStatus::ok);
  CHECK(ep2.gpus_per_replica == 2);
  CHECK(ep2.gpus == 2 * ep2.replicas);
  CHECK(ep2.cost_per_hour == Approx(ep2.gpus * ep2.price_per_gpu_hour));
  CHECK_THAT(vllm_serve_command(ep2.candidate), Catch::Contains("--data-parallel-size 2 --enable-expert-parallel"));
}

TEST_CASE("plan searches the prefill:decode split: at a tight SLO a 1:1 unit serves more per GPU, at a loose one less") {
  // A unit of one prefill and one decode replica against one co-located
  // replica: the capacity each sustains, per GPU (DistServe's per-GPU
  // goodput), as plan's cost at capacity ranks them.
  PlanOptions o;
  o.space = one_kind();
  o.space.pd = {{0, 0}, {1, 1}};
  o.capacity.probe_requests = 300;
  o.capacity.tolerance = 0.05;
  o.verify_requests = 300;
  o.jobs = 2;
  const LoadedTrace trace = long_prompts(300, 3.0);
  o.slos = "ttft_p90<=1s,tpot_p90<=15ms";
  const PlanResult tight = run_plan(trace, o);
  const CandidateResult& co = by_label(tight, "h100-80gb tp=1 vllm least_outstanding");
  const CandidateResult& pd = by_label(tight, "h100-80gb tp=1 pd=1:1 vllm least_outstanding");
  REQUIRE(co.capacity.feasible);
  REQUIRE(pd.capacity.feasible);
  CHECK(pd.gpus_per_replica == 2);
  INFO("tight: co-located " << co.capacity.capacity << " req/s on 1 GPU, 1P+1D " << pd.capacity.capacity
                            << " req/s on 2");
  CHECK(pd.capacity.capacity / 2 > co.capacity.capacity);
  CHECK(pd.cost_per_m_output_tokens_at_capacity < co.cost_per_m_output_tokens_at_capacity);

  o.slos = "ttft_p90<=10s,tpot_p90<=100ms";
  const PlanResult loose = run_plan(trace, o);
  const CandidateResult& co_l = by_label(loose, "h100-80gb tp=1 vllm least_outstanding");
  const CandidateResult& pd_l = by_label(loose, "h100-80gb tp=1 pd=1:1 vllm least_outstanding");
  INFO("loose: co-located " << co_l.capacity.capacity << " req/s on 1 GPU, 1P+1D " << pd_l.capacity.capacity
                            << " req/s on 2");
  CHECK(pd_l.capacity.capacity / 2 < co_l.capacity.capacity);
  CHECK(pd_l.cost_per_m_output_tokens_at_capacity > co_l.cost_per_m_output_tokens_at_capacity);
}

}  // namespace twin

namespace twin {

TEST_CASE("plan --pd, --ep, --kv-dram-gib: a plan over them writes the keys, bad values name the flag") {
  const std::string trace = test::write_vidur(test::chat_trace(40, 4.0), "dims_trace.csv");
  const auto out = test::planner_tmp("plan_dims");
  const std::string base = "plan --trace '" + trace + "' --hw h100-80gb --tp 1 --slo 'ttft_p90<=2s,tpot_p90<=100ms' "
                           "--probe-requests 40 --tolerance 0.2 --no-plots --quiet --overwrite --out '" + out.string() + "' ";
  const auto ok = test::run_twinserve(base + "--pd none,1:1 --kv-dram-gib 0,16", true);
  INFO(ok.out);
  REQUIRE(ok.exit_code == 0);
  CHECK_THAT(ok.out, Catch::Contains("pd=1:1") && Catch::Contains("dram=16GiB"));
  const std::string json = test::read_file(out / "plan.json");
  CHECK_THAT(json, Catch::Contains("\"prefill_replicas\": 1") && Catch::Contains("\"kv_dram_gib\": 16"));
  CHECK_THAT(json, Catch::Contains("\"pd\": ["));
  for (const auto& [flags, named] : std::vector<std::pair<std::string, std::string>>{
           {"--pd 1-1", "--pd"}, {"--pd 0:2", "--pd"}, {"--ep 0", "--ep"}, {"--kv-dram-gib -4", "--kv-dram-gib"}}) {
    const auto r = test::run_twinserve(base + flags, true);
    INFO(flags << " -> " << r.out);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.out, Catch::Contains(named));
  }
}

}  // namespace twin

namespace twin {

TEST_CASE("sweep varies ep and the expert imbalance: more skew, slower decodes, GPUs counted with ep") {
  ClusterConfig base;
  ReplicaGroupConfig g;
  g.model = "mixtral-8x7b";
  g.hardware = "h100-80gb";
  g.ep = 4;
  base.groups.push_back(g);
  base.slos = "ttft_p90<=2s";
  const std::vector<VaryAxis> axes = {parse_vary("expert_busiest_share=0.25,0.5,1")};
  check_vary_axes(base, axes);
  SweepOptions o;
  o.jobs = 1;
  const auto points = run_sweep(base, axes, test::chat_trace(60, 4.0), o);
  REQUIRE(points.size() == 3);
  for (const auto& p : points) {
    CHECK(p.error.empty());
    CHECK(p.gpus == 4);
  }
  CHECK(points[0].result.tpot_ms.p50 < points[1].result.tpot_ms.p50);
  CHECK(points[1].result.tpot_ms.p50 < points[2].result.tpot_ms.p50);
  CHECK_THROWS_WITH(check_vary_axes(base, {parse_vary("expert_busiest_share=2")}),
                    Catch::Contains("expert_busiest_share"));
}

}  // namespace twin
