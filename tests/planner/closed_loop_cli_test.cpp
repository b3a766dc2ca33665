// plan and sweep with closed-loop clients (--max-concurrency, --request-rate
// inf) and plan's precision flags, end to end through twinserve: the cap is
// read back from the files they write (the most requests in flight at once,
// counted at the client apart from the cap's own bookkeeping), and bad
// values are usage errors naming the flag.
#include <catch2/catch.hpp>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/planner/planner_test_util.hpp"
#include "tests/support/run_cli.hpp"

namespace twin {
namespace {

std::vector<std::vector<std::string>> read_csv(const std::filesystem::path& path) {
  std::vector<std::vector<std::string>> rows;
  std::stringstream in(test::read_file(path));
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::stringstream cols(line);
    for (std::string c; std::getline(cols, c, ',');) cells.push_back(c);
    rows.push_back(cells);
  }
  return rows;
}

std::size_t column(const std::vector<std::string>& header, const std::string& name) {
  for (std::size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return i;
  }
  FAIL("sweep.csv has no column " << name);
  return 0;
}

}  // namespace

TEST_CASE("sweep --max-concurrency 1,4,16 --request-rate inf: each point's cap holds and fills") {
  const std::string trace = test::write_vidur(test::chat_trace(60, 5.0), "closed_loop_sweep.csv");
  const auto out = test::planner_tmp("sweep_closed");
  std::filesystem::remove_all(out);
  const auto r = test::run_twinserve("sweep --trace '" + trace + "' --max-concurrency 1,4,16 --request-rate inf --quiet --out '" +
                                         out.string() + "'",
                                     true);
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  const auto rows = read_csv(out / "sweep.csv");
  REQUIRE(rows.size() == 4);
  const auto& h = rows.front();
  REQUIRE(h.front() == "max_concurrency");
  std::vector<double> throughput;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const int cap = std::stoi(rows[i][0]);
    INFO("max_concurrency " << cap);
    CHECK(rows[i][column(h, "status")] == "ok");
    CHECK(rows[i][column(h, "completed")] == "60");
    // Every request at once behind the cap: exactly `cap` in flight at the peak.
    CHECK(std::stoi(rows[i][column(h, "peak_in_flight")]) == cap);
    CHECK(rows[i][column(h, "rate_rps")].empty());  // inf offers no rate
    throughput.push_back(std::stod(rows[i][column(h, "request_throughput")]));
  }
  // The closed loop's curve: more clients, more requests served per second.
  CHECK(throughput[0] < throughput[1]);
  CHECK(throughput[1] < throughput[2]);
}

TEST_CASE("sweep: --data-parallel-size and --tp lists are axes, and without clients the columns stay") {
  const std::string trace = test::write_vidur(test::chat_trace(40, 5.0), "closed_loop_axes.csv");
  const auto out = test::planner_tmp("sweep_axes");
  std::filesystem::remove_all(out);
  const auto r = test::run_twinserve("sweep --trace '" + trace + "' -tp 1,2 --data-parallel-size 1,2 --quiet --out '" +
                                         out.string() + "'",
                                     true);
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  const auto rows = read_csv(out / "sweep.csv");
  REQUIRE(rows.size() == 5);
  CHECK(rows[0][0] == "tp");
  CHECK(rows[0][1] == "dp");
  for (const auto& cell : rows[0]) CHECK(cell != "peak_in_flight");
  // tp 2 x dp 2: four GPUs in the one instance.
  CHECK(rows[4][column(rows[0], "gpus")] == "4");
}

TEST_CASE("plan --max-concurrency 4: every probe and cluster check keeps at most 4 in flight") {
  const std::string trace = test::write_vidur(test::chat_trace(160, 20.0), "closed_loop_plan.csv");
  const auto out = test::planner_tmp("plan_closed");
  std::filesystem::remove_all(out);
  const auto r = test::run_twinserve("plan --trace '" + trace + "' --hw h100-80gb -tp 1 --slo 'ttft_p90<=2s' "
                                     "--probe-requests 80 --tolerance 0.1 --max-concurrency 4 --no-plots --quiet --out '" +
                                         out.string() + "'",
                                     true);
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json plan = nlohmann::json::parse(test::read_file(out / "plan.json"));
  CHECK(plan.at("clients").at("max_concurrency") == 4);
  std::int64_t most = 0;
  std::size_t runs = 0;
  for (const auto& c : plan.at("candidates")) {
    for (const char* key : {"probes", "verify"}) {
      for (const auto& run : c.at(key)) {
        const std::int64_t peak = run.at("peak_in_flight").get<std::int64_t>();
        CHECK(peak >= 1);
        CHECK(peak <= 4);
        most = std::max(most, peak);
        ++runs;
      }
    }
  }
  CHECK(runs >= 2);   // a probe at least, and the cluster check
  CHECK(most == 4);  // a probe near the closed loop's throughput fills the cap
}

TEST_CASE("plan -q fp8 --kv-cache-dtype fp8: candidates in fp8 hold more KV than in bf16") {
  const std::string trace = test::write_vidur(test::chat_trace(60, 5.0), "closed_loop_fp8.csv");
  auto blocks = [&](const std::string& name, const std::string& flags) {
    const auto out = test::planner_tmp(name);
    std::filesystem::remove_all(out);
    const auto r = test::run_twinserve("plan --trace '" + trace + "' --hw h100-80gb --tensor-parallel-size 1 "
                                       "--slo 'ttft_p90<=2s' --probe-requests 40 --tolerance 0.2 --no-plots --quiet " +
                                           flags + " --out '" + out.string() + "'",
                                       true);
    INFO(r.out);
    REQUIRE(r.exit_code == 0);
    const nlohmann::json plan = nlohmann::json::parse(test::read_file(out / "plan.json"));
    return plan.at("candidates").at(0);
  };
  const nlohmann::json bf16 = blocks("plan_bf16", "");
  const nlohmann::json fp8 = blocks("plan_fp8", "-q fp8 --kv-cache-dtype fp8");
  CHECK(fp8.at("candidate").at("quantization") == "fp8");
  CHECK(fp8.at("candidate").at("kv_dtype") == "fp8");
  CHECK_FALSE(bf16.at("candidate").contains("quantization"));
  // Half the bytes per KV token and per weight: more than twice the blocks.
  CHECK(fp8.at("num_gpu_blocks").get<double>() > 2.0 * bf16.at("num_gpu_blocks").get<double>());
}

TEST_CASE("plan and sweep: bad client values are usage errors naming the flag") {
  const std::string trace = test::write_vidur(test::chat_trace(20, 5.0), "closed_loop_bad.csv");
  const std::string plan = "plan --trace '" + trace + "' --slo 'ttft_p90<=2s' --out '" +
                           test::planner_tmp("plan_bad").string() + "' ";
  const std::string sweep = "sweep --trace '" + trace + "' ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {plan + "--max-concurrency 0", "--max-concurrency"},
      {plan + "--max-concurrency x", "--max-concurrency"},
      {plan + "--request-rate inf", "--request-rate inf"},
      {plan + "--request-rate 3", "--request-rate"},
      {plan + "--think-time-s 1", "--think-time-s needs --sessions"},
      {plan + "-dp 2", "--data-parallel-size"},
      {plan + "-q int3", "int3"},
      {sweep + "--max-concurrency 2,0", "--max-concurrency"},
      {sweep + "--vary max_concurrency=4,-1", "--max-concurrency"},
      {sweep + "--data-parallel-size 0", "--data-parallel-size"},
      {sweep, "--vary"},
      {sweep + "--hw h200", "--vary hardware"},  // refused with the way to do it
      {"run --trace '" + trace + "' -tp 2", "the engine runs one device"},
  };
  for (const auto& [args, says] : cases) {
    const auto r = test::run_twinserve(args, true);
    INFO(args << "\n" << r.out);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.out, Catch::Contains(says));
  }
}

}  // namespace twin
