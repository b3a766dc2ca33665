// twinserve plan / sweep end to end: outputs, bad input, same bytes for any
// thread count and under MPI.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/planner/planner_test_util.hpp"
#include "tests/support/run_cli.hpp"
#include "tests/support/skip.hpp"

namespace twin {
namespace {

std::string plan_args(const std::string& trace, const std::filesystem::path& out) {
  return "plan --trace '" + trace + "' --model llama-3.1-8b --hw h100-80gb,a100-80gb --tp 1,3 --max-num-batched-tokens 1024,4096 "
         "--slo 'ttft_p90<=1s,tpot_p90<=60ms' --probe-requests 120 --tolerance 0.05 --no-plots --out '" +
         out.string() + "'";
}

TEST_CASE("plan writes its files and gives the same bytes on 1 and 2 threads") {
  const std::string trace = test::write_vidur(test::chat_trace(200, 15.0), "cli_trace.csv");
  const auto a = test::planner_tmp("plan_j1"), b = test::planner_tmp("plan_j2");
  std::filesystem::remove_all(a);
  std::filesystem::remove_all(b);
  const auto r1 = test::run_twinserve(plan_args(trace, a) + " --jobs 1", true);
  INFO(r1.out);
  REQUIRE(r1.exit_code == 0);
  CHECK_THAT(r1.out, Catch::Contains("Chosen:"));
  CHECK_THAT(r1.out, Catch::Contains("Pruned (4)"));
  const auto r2 = test::run_twinserve(plan_args(trace, b) + " --jobs 2", true);
  REQUIRE(r2.exit_code == 0);
  for (const char* f : {"plan.json", "plan.csv", "pareto.csv"}) {
    INFO(f);
    CHECK(!test::read_file(a / f).empty());
    CHECK(test::read_file(a / f) == test::read_file(b / f));
  }
  // The earlier search, as --capacity-search doubling asks: plan.json says which ran.
  const auto d = test::planner_tmp("plan_doubling");
  std::filesystem::remove_all(d);
  const auto r3 = test::run_twinserve(plan_args(trace, d) + " --jobs 1 --capacity-search doubling", true);
  REQUIRE(r3.exit_code == 0);
  CHECK_THAT(r3.out, Catch::Contains("bracketed by doubling from the planned rate"));
  const auto method = nlohmann::json::parse(test::read_file(d / "plan.json")).at("method");
  CHECK(method.at("capacity_search") == "doubling");
  CHECK(nlohmann::json::parse(test::read_file(a / "plan.json")).at("method").at("capacity_search") == "from_saturation");
  // No overwrite without --overwrite.
  const auto again = test::run_twinserve(plan_args(trace, a), true);
  CHECK(again.exit_code == 2);
  CHECK_THAT(again.out, Catch::Contains("--overwrite"));
}

TEST_CASE("plan under mpirun -n 2 writes the single-process bytes") {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) TWIN_SKIP("mpirun not found: no MPI comparison");
  const char* bin = std::getenv("TWIN_BIN");
  REQUIRE(bin != nullptr);
  const std::string trace = test::write_vidur(test::chat_trace(200, 15.0), "mpi_trace.csv");
  const auto single = test::planner_tmp("plan_single"), multi = test::planner_tmp("plan_mpi");
  std::filesystem::remove_all(single);
  std::filesystem::remove_all(multi);
  REQUIRE(test::run_twinserve(plan_args(trace, single) + " --jobs 1").exit_code == 0);
  // Open MPI's own allocations are never freed at exit: with LeakSanitizer
  // (make test-asan) that would fail the ranks, so leak checks are off for
  // them (the single-process run above keeps them).
  const std::string cmd = "ASAN_OPTIONS=detect_leaks=0 mpirun --allow-run-as-root --oversubscribe -x ASAN_OPTIONS -n 2 '" +
                          std::string(bin) + "' " + plan_args(trace, multi) +
                          " --jobs 1 > '" + test::planner_tmp("mpi.log").string() + "' 2>&1";
  const int status = std::system(cmd.c_str());
  INFO(test::read_file(test::planner_tmp("mpi.log")));
  REQUIRE(status == 0);
  CHECK_THAT(test::read_file(test::planner_tmp("mpi.log")), Catch::Contains("2 MPI ranks"));
  for (const char* f : {"plan.json", "plan.csv", "pareto.csv"}) {
    INFO(f);
    CHECK(test::read_file(single / f) == test::read_file(multi / f));
  }
}

TEST_CASE("plan --target-rate: plan.json, plan.csv and plan.html say which rate was planned for") {
  const std::string trace = test::write_vidur(test::chat_trace(120, 6.0), "target_trace.csv");
  const auto out = test::planner_tmp("plan_target");
  std::filesystem::remove_all(out);
  const auto r = test::run_twinserve("plan --trace '" + trace + "' --model llama-3.1-8b --hw h100-80gb --tp 1 "
                                     "--slo 'ttft_p90<=1s,tpot_p90<=60ms' --probe-requests 120 --tolerance 0.05 --no-plots "
                                     "--target-rate 30 --out '" + out.string() + "'",
                                     true);
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("Planned for 30.000 req/s (--target-rate"));
  const auto json = nlohmann::json::parse(test::read_file(out / "plan.json"));
  CHECK(json.at("planned_rate_rps").get<double>() == 30.0);
  CHECK(json.at("target_rate_rps").get<double>() == 30.0);
  CHECK(json.at("trace").at("rate_rps").get<double>() < 7.0);
  const std::string csv = test::read_file(out / "plan.csv");
  CHECK_THAT(csv, Catch::Contains(",latency_ms,planned_rate_rps,"));
  CHECK_THAT(csv, Catch::Contains(",30.0000,"));
  CHECK_THAT(test::read_file(out / "plan.html"), Catch::Contains("Planned for <b>30.000 req/s</b> (<code>--target-rate</code>"));
  const auto zero = test::run_twinserve("plan --trace '" + trace + "' --slo 'ttft_p90<=1s' --target-rate 0 --out '" +
                                            test::planner_tmp("plan_target0").string() + "'",
                                        true);
  CHECK(zero.exit_code == 2);
  CHECK_THAT(zero.out, Catch::Contains("--target-rate"));
}

TEST_CASE("plan and sweep reject bad input naming the key") {
  const std::string trace = test::write_vidur(test::chat_trace(30, 5.0), "bad_trace.csv");
  const std::string search = test::planner_tmp("bad_search.json").string();
  std::ofstream(search) << R"({"hardware": ["h100-80gb"], "tensor_parallel": [1]})";
  const auto out = test::planner_tmp("plan_bad");
  const auto r = test::run_twinserve("plan --trace '" + trace + "' --search '" + search + "' --slo 'ttft_p90<=1s' --out '" +
                                         out.string() + "'",
                                     true);
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.out, Catch::Contains("tensor_parallel"));
  const auto no_slo = test::run_twinserve("plan --trace '" + trace + "' --slo '' --out '" + out.string() + "'", true);
  CHECK(no_slo.exit_code == 2);
  const auto bad_search = test::run_twinserve(
      "plan --trace '" + trace + "' --slo 'ttft_p90<=1s' --capacity-search bisect --out '" + out.string() + "'", true);
  CHECK(bad_search.exit_code == 2);
  CHECK_THAT(bad_search.out, Catch::Contains("--capacity-search"));
  const auto s = test::run_twinserve("sweep --trace '" + trace + "' --vary max_num_batched_tokens=512 --vary chunky=1,2", true);
  CHECK(s.exit_code == 2);
  CHECK_THAT(s.out, Catch::Contains("chunky"));
}

TEST_CASE("sweep prints a table and writes sweep.csv") {
  const std::string trace = test::write_vidur(test::chat_trace(40, 5.0), "sweep_trace.csv");
  const auto out = test::planner_tmp("sweep_out");
  std::filesystem::remove_all(out);
  const auto r = test::run_twinserve("sweep --trace '" + trace + "' --vary router=round_robin,least_outstanding --vary replicas=1,2 "
                                     "--slo 'ttft_p90<=1s' --out '" + out.string() + "'",
                                     true);
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("least_outstanding"));
  const std::string csv = test::read_file(out / "sweep.csv");
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 5);
}

TEST_CASE("plan's gnuplot plots: names as written (no enhanced-text subscripts), bars and costs from 0") {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) TWIN_SKIP("gnuplot not found: no plot check");
  const std::string trace = test::write_vidur(test::chat_trace(120, 6.0), "plots_trace.csv");
  const auto out = test::planner_tmp("plan_plots");
  std::filesystem::remove_all(out);
  const auto r = test::run_twinserve("plan --trace '" + trace + "' --model llama-3.1-8b --hw h100-80gb --tp 1,2 "
                                     "--router least_outstanding --slo 'ttft_p90<=1s,tpot_p90<=60ms' --probe-requests 120 "
                                     "--tolerance 0.05 --out '" + out.string() + "'", true);
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  for (const char* f : {"capacity.svg", "frontier.svg"}) {
    INFO(f);
    const std::string svg = test::read_file(out / f);
    REQUIRE(!svg.empty());
    // Enhanced text would set "outstanding" as a subscript, in a <tspan>.
    CHECK_THAT(svg, Catch::Contains(">h100-80gb tp=1 vllm least_outstanding</text>"));
    CHECK_THAT(svg, !Catch::Contains("<tspan"));
  }
  // The capacity bars' axis starts at 0 (its only numeric axis).
  CHECK_THAT(test::read_file(out / "capacity.svg"), Catch::Contains("> 0</text>"));
}

}  // namespace
}  // namespace twin
