#include <catch2/catch.hpp>

#include <string>

#include "base/error.hpp"
#include "metrics/slo.hpp"

using twin::Metric;
using twin::parse_slos;

namespace {
std::string error_of(const std::string& text) {
  try {
    parse_slos(text);
  } catch (const twin::UsageError& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("parse_slos reads metrics, percentiles and units") {
  const auto slos = parse_slos("ttft_p90<=2s,tpot_p99<=100ms,e2el_p50<=10s");
  REQUIRE(slos.size() == 3);
  CHECK(slos[0].metric == Metric::ttft);
  CHECK(slos[0].percentile == 90);
  CHECK(slos[0].threshold_ms == 2000);
  CHECK(slos[1].metric == Metric::tpot);
  CHECK(slos[1].percentile == 99);
  CHECK(slos[1].threshold_ms == 100);
  CHECK(slos[2].metric == Metric::e2el);
  CHECK(slos[2].threshold_ms == 10000);

  const auto more = parse_slos(" itl <= 500us , ttft_p99.9<=1.5s ");
  REQUIRE(more.size() == 2);
  CHECK(more[0].metric == Metric::itl);
  CHECK(more[0].percentile == 0);
  CHECK(more[0].threshold_ms == Approx(0.5));
  CHECK(more[1].percentile == Approx(99.9));
  CHECK(more[1].threshold_ms == 1500);

  CHECK(parse_slos("").empty());
  CHECK(parse_slos("  ").empty());
}

TEST_CASE("format_slos reads back to the same SLOs") {
  const auto slos = parse_slos("ttft_p90<=2s,itl<=250us,e2el_p99.5<=12.5s");
  const auto again = parse_slos(twin::format_slos(slos));
  REQUIRE(again.size() == slos.size());
  for (std::size_t i = 0; i < slos.size(); ++i) {
    CHECK(again[i].metric == slos[i].metric);
    CHECK(again[i].percentile == slos[i].percentile);
    CHECK(again[i].threshold_ms == slos[i].threshold_ms);
  }
  CHECK(twin::format_slos(slos) == "ttft_p90<=2000ms,itl<=0.25ms,e2el_p99.5<=12500ms");
}

TEST_CASE("parse_slos errors name the failing part and what was expected") {
  using Catch::Matchers::Contains;
  CHECK_THAT(error_of("ttft_p90<=2s,ttfx_p90<=2s"), Contains("\"ttfx_p90<=2s\"") && Contains("unknown metric \"ttfx\"") &&
                                                     Contains("ttft, tpot, itl, e2el"));
  CHECK_THAT(error_of("ttft_p90<2s"), Contains("\"ttft_p90<2s\"") && Contains("\"<=\""));
  CHECK_THAT(error_of("ttft_p0<=1s"), Contains("bad percentile \"p0\""));
  CHECK_THAT(error_of("ttft_p101<=1s"), Contains("(0, 100]"));
  CHECK_THAT(error_of("ttft_90<=1s"), Contains("bad percentile \"90\""));
  CHECK_THAT(error_of("ttft_p90<=2"), Contains("missing unit"));
  CHECK_THAT(error_of("ttft_p90<=2min"), Contains("unknown unit \"min\""));
  CHECK_THAT(error_of("ttft_p90<=-1s"), Contains("bad threshold \"-1\""));
  CHECK_THAT(error_of("ttft_p90<=0ms"), Contains("positive"));
  CHECK_THAT(error_of("ttft_p90<=s"), Contains("bad threshold"));
  CHECK_THAT(error_of("ttft<=1s,,tpot<=1ms"), Contains("part 2 is empty"));
  CHECK_THAT(error_of("ttft<=1s,"), Contains("part 2 is empty"));
  CHECK_THROWS_AS(parse_slos("nonsense"), twin::UsageError);
}

TEST_CASE("a percentile is plain decimal digits: p1e1, p50. and p.5 are refused, not read as numbers") {
  using Catch::Matchers::Contains;
  CHECK_THAT(error_of("ttft_p1e1<=1s"), Contains("bad percentile \"p1e1\""));
  CHECK_THAT(error_of("ttft_p50.<=1s"), Contains("bad percentile \"p50.\""));
  CHECK_THAT(error_of("ttft_p.5<=1s"), Contains("bad percentile \"p.5\""));
  CHECK_THAT(error_of("ttft_p+50<=1s"), Contains("bad percentile"));
  CHECK_THAT(error_of("ttft_p0x10<=1s"), Contains("bad percentile"));
  CHECK_THAT(error_of("ttft_p90<=2.s"), Contains("bad threshold \"2.\""));
  CHECK_THAT(error_of("ttft_p90<=1e309s"), Contains("bad threshold"));
  CHECK_THAT(error_of("ttft_p90<=1e306s"), Contains("too large"));
  CHECK(parse_slos("ttft_p99.5<=1.5e3ms").front().threshold_ms == 1500);
  // A tiny percentile is written without an exponent, so it reads back.
  const auto tiny = parse_slos("ttft_p0.00001<=1s");
  CHECK(parse_slos(twin::format_slos(tiny)).front().percentile == tiny.front().percentile);
}

TEST_CASE("an SLO error quotes at most a short excerpt of a long part") {
  const std::string part = "ttft_p90<=" + std::string(5000, '9') + "x";
  const std::string message = error_of(part);
  CHECK(message.find("SLO \"ttft_p90<=999") == 0);
  CHECK(message.size() < 400);
}
