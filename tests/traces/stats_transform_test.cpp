#include <catch2/catch.hpp>

#include "base/error.hpp"
#include "tests/traces/test_util.hpp"
#include "traces/trace_stats.hpp"
#include "traces/transforms.hpp"

using namespace twin;
using namespace twin::test;

namespace {

std::vector<Request> run(std::vector<Request> in, const TransformOptions& o) {
  std::size_t i = 0;
  TraceTransform t(
      [&](Request& r) {
        if (i >= in.size()) return false;
        r = in[i++];
        return true;
      },
      o);
  std::vector<Request> out;
  Request r;
  while (t.next(r)) out.push_back(r);
  return out;
}

std::vector<Request> ten_requests() {
  std::vector<Request> v(10);
  for (int i = 0; i < 10; ++i) {
    v[static_cast<std::size_t>(i)].id = i;
    v[static_cast<std::size_t>(i)].arrival = i * kNsPerSec;
    v[static_cast<std::size_t>(i)].prompt_len = 100 * (i + 1);
    v[static_cast<std::size_t>(i)].output_len = 10 * (i + 1);
  }
  return v;
}

}  // namespace

TEST_CASE("Stats: nearest-rank percentiles, rate, CV", "[traces]") {
  auto v = ten_requests();
  std::size_t i = 0;
  const TraceStats st = compute_stats([&](Request& r) {
    if (i >= v.size()) return false;
    r = v[i++];
    return true;
  });
  CHECK(st.num_requests == 10);
  CHECK(st.span_s == Approx(9));
  CHECK(st.mean_rate == Approx(1));
  CHECK(st.interarrival_cv == Approx(0).margin(1e-12));
  CHECK(st.prompt_tokens.mean == Approx(550));
  CHECK(st.prompt_tokens.p50 == 500);  // rank ceil(0.5 * 10) = 5
  CHECK(st.prompt_tokens.p90 == 900);
  CHECK(st.prompt_tokens.p99 == 1000);
  CHECK(st.prompt_tokens.max == 1000);
  CHECK(st.output_tokens.p50 == 50);
}

TEST_CASE("Stats: prefix share hashes chains, not bare ids", "[traces]") {
  std::vector<Request> v(3);
  for (auto& r : v) {
    r.prompt_len = 32;
    r.output_len = 1;
    r.hash_block_size = 16;
  }
  v[0].hash_ids = {1, 2};
  v[1].hash_ids = {3, 2};  // id 2 under another parent: no hit
  v[2].hash_ids = {1, 2};  // full hit
  std::size_t i = 0;
  const TraceStats st = compute_stats([&](Request& r) {
    if (i >= v.size()) return false;
    r = v[i++];
    return true;
  });
  CHECK(st.prefix_cache_share == Approx(32.0 / 96.0));
}

TEST_CASE("Transforms: time window, count, rate scale, clipping", "[traces]") {
  TransformOptions o;
  o.start_s = 2;
  o.end_s = 6;
  auto w = run(ten_requests(), o);
  REQUIRE(w.size() == 4);
  CHECK(w[0].id == 2);
  CHECK(w[0].arrival == 0);
  CHECK(w[3].arrival == 3 * kNsPerSec);

  o = {};
  o.max_requests = 3;
  o.rate_scale = 2;
  auto s = run(ten_requests(), o);
  REQUIRE(s.size() == 3);
  CHECK(s[2].arrival == kNsPerSec);

  // Cancel times scale with the arrivals: the client's patience too.
  o = {};
  o.start_s = 1;
  o.rate_scale = 4;
  auto with_cancel = ten_requests();
  with_cancel[3].cancel_time = with_cancel[3].arrival + 2 * kNsPerSec;
  auto patient = run(with_cancel, o);
  REQUIRE(patient.size() == 9);
  CHECK(patient[2].arrival == kNsPerSec / 2);
  CHECK(patient[2].cancel_time == kNsPerSec / 2 + kNsPerSec / 2);

  o = {};
  o.max_prompt = 250;
  o.max_output = 25;
  auto input = ten_requests();
  input[5].hash_block_size = 100;
  input[5].hash_ids = {1, 2, 3, 4, 5, 6};
  auto c = run(input, o);
  REQUIRE(c.size() == 10);
  CHECK(c[0].prompt_len == 100);
  CHECK(c[9].prompt_len == 250);
  CHECK(c[9].output_len == 25);
  CHECK(c[1].output_len == 20);
  CHECK(c[5].hash_ids == std::vector<std::uint64_t>{1, 2, 3});

  o = {};
  o.rate_scale = 0;
  CHECK_THROWS_WITH(run(ten_requests(), o), Catch::Contains("--scale-rate"));
  o = {};
  o.start_s = 5;
  o.end_s = 5;
  CHECK_THROWS_AS(run(ten_requests(), o), UsageError);
  // Past the int64 ns clock: refused, never wrapped.
  o = {};
  o.start_s = 1e12;
  CHECK_THROWS_WITH(run(ten_requests(), o), Catch::Contains("--start-s"));
  o = {};
  o.end_s = 1e300;
  CHECK_THROWS_WITH(run(ten_requests(), o), Catch::Contains("--end-s"));
  o = {};
  o.rate_scale = 1e-300;
  CHECK_THROWS_WITH(run(ten_requests(), o), Catch::Contains("--scale-rate") && Catch::Contains("292 years"));
}
