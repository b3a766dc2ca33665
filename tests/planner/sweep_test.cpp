// twinserve sweep: the grid, key checking, per-point errors.
#include <catch2/catch.hpp>

#include <sstream>

#include "base/error.hpp"
#include "planner/sweep.hpp"
#include "tests/planner/planner_test_util.hpp"

namespace twin {
namespace {

TEST_CASE("sweep runs the cartesian product in grid order") {
  ClusterConfig base;
  base.groups.emplace_back();
  base.slos = "ttft_p90<=2s";
  const std::vector<VaryAxis> axes = {parse_vary("max_num_batched_tokens=512,2048"), parse_vary("enable_prefix_caching=true,false"),
                                      parse_vary("tp=1,3")};
  check_vary_axes(base, axes);
  SweepOptions o;
  o.jobs = 2;
  const auto points = run_sweep(base, axes, test::chat_trace(60, 10.0), o);
  REQUIRE(points.size() == 8);
  CHECK(points[0].values == std::vector<std::string>{"512", "true", "1"});
  CHECK(points[1].values == std::vector<std::string>{"512", "true", "3"});
  CHECK(points[7].values == std::vector<std::string>{"2048", "false", "3"});
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (i % 2 == 1) {
      CHECK_THAT(points[i].error, Catch::Contains("tp"));  // 3 does not divide 32 heads
    } else {
      CHECK(points[i].error.empty());
      CHECK(points[i].result.completed == 60);
    }
  }
  std::ostringstream csv;
  write_sweep_csv(csv, axes, points);
  const std::string text = csv.str();
  CHECK(text.rfind("max_num_batched_tokens,enable_prefix_caching,tp,status,", 0) == 0);
  CHECK(std::count(text.begin(), text.end(), '\n') == 9);
}

TEST_CASE("sweep stopped: the points not started are left out, and those a stop cut short") {
  ClusterConfig base;
  base.groups.emplace_back();
  const std::vector<VaryAxis> axes = {parse_vary("max_num_batched_tokens=512,1024,2048")};
  CHECK(grid_size(axes) == 3);
  SweepOptions o;
  o.jobs = 1;
  int asked = 0;
  o.stop = [&] { return ++asked > 1; };  // the second point never starts
  const auto first = run_sweep(base, axes, test::chat_trace(30, 10.0), o);
  REQUIRE(first.size() == 1);
  CHECK(first[0].values == std::vector<std::string>{"512"});
  CHECK(first[0].result.completed == 30);
  // A stop inside every point's run: no point finishes, none is reported
  // with part of the trace's figures.
  SweepOptions cut;
  cut.jobs = 1;
  cut.stop_running = [] { return true; };
  CHECK(run_sweep(base, axes, test::chat_trace(30, 10.0), cut).empty());
}

TEST_CASE("sweep warns of an axis that changed no figure and only of it") {
  ClusterConfig base;
  base.groups.emplace_back();
  // The chat trace has no prefix hash ids: prefix caching cannot matter;
  // the token budget does.
  const std::vector<VaryAxis> axes = {parse_vary("enable_prefix_caching=true,false"),
                                      parse_vary("max_num_batched_tokens=64,8192")};
  const auto points = run_sweep(base, axes, test::chat_trace(60, 20.0), SweepOptions{});
  const std::vector<std::string> warnings = sweep_warnings(axes, points);
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::StartsWith("--vary enable_prefix_caching changed no figure"));
  // One axis alone, or an axis of one value: nothing to compare, no warning.
  const std::vector<VaryAxis> single = {parse_vary("enable_prefix_caching=true")};
  CHECK(sweep_warnings(single, run_sweep(base, single, test::chat_trace(20, 20.0), SweepOptions{})).empty());
}

TEST_CASE("sweep rejects unknown keys and bad values naming the key") {
  ClusterConfig base;
  CHECK_THROWS_WITH(check_vary_axes(base, {parse_vary("bogus_knob=1,2")}), Catch::Contains("bogus_knob"));
  CHECK_THROWS_WITH(check_vary_axes(base, {parse_vary("router=round_robin,nope")}), Catch::Contains("router"));
  CHECK_THROWS_WITH(check_vary_axes(base, {parse_vary("tp=one")}), Catch::Contains("tp"));
  CHECK_THROWS_AS(parse_vary("tp"), UsageError);
  CHECK_THROWS_AS(parse_vary("tp=1,,2"), UsageError);
}

TEST_CASE("rate_scale multiplies the offered rate") {
  ClusterConfig base;
  base.groups.emplace_back();
  const std::vector<VaryAxis> axes = {parse_vary("rate_scale=1,4")};
  const auto points = run_sweep(base, axes, test::chat_trace(50, 5.0), SweepOptions{});
  REQUIRE(points.size() == 2);
  CHECK(points[1].result.rate == Approx(4 * points[0].result.rate));
}

}  // namespace
}  // namespace twin
