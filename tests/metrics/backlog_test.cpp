// The overload warning: a queue that grows over the trace is flagged, a
// steady service, a burst and a handful of requests are not; the collector
// puts it in the summary (and summary.json) only when it applies.
#include <catch2/catch.hpp>

#include <sstream>

#include "metrics/backlog.hpp"
#include "metrics/collector.hpp"
#include "metrics/summary_json.hpp"

namespace twin {
namespace {

// n requests one second apart, TTFT = base + growth * arrival.
std::vector<std::pair<Time, Time>> arrivals(int n, double base_s, double growth) {
  std::vector<std::pair<Time, Time>> out;
  for (int i = 0; i < n; ++i) {
    const double ttft_s = base_s + growth * i;
    out.emplace_back(static_cast<Time>(i) * kNsPerSec, static_cast<Time>(ttft_s * 1e9));
  }
  return out;
}

RequestRecord finished(RequestId id, Time arrival, Time ttft) {
  RequestRecord r;
  r.id = id;
  r.replica = 0;
  r.arrival = arrival;
  r.first_token = arrival + ttft;
  r.finish = r.first_token + kNsPerSec;
  r.prompt_tokens = 10;
  r.output_tokens = 2;
  r.itl = {kNsPerSec};
  return r;
}

}  // namespace

TEST_CASE("backlog: a queue growing with the arrivals is flagged with both rates") {
  const BacklogTrend t = backlog_trend(arrivals(100, 0.2, 0.5), 100, 0, 99 * kNsPerSec);
  CHECK(t.falling_behind);
  CHECK(t.offered_rate == Approx(1.0));
  CHECK(t.early == 25);
  CHECK(t.late == 25);
  CHECK(t.late_ttft_p50_ms > 4 * t.early_ttft_p50_ms);
  const auto w = backlog_warning(t, 0.25);
  REQUIRE(w);
  CHECK(w->find("1.00 req/s") != std::string::npos);
  CHECK(w->find("0.25 req/s were served") != std::string::npos);
}

TEST_CASE("backlog: steady latencies, a slow but flat service, a burst and a few requests are not flagged") {
  CHECK_FALSE(backlog_trend(arrivals(100, 0.2, 0.0), 100, 0, 99 * kNsPerSec).falling_behind);
  // Slow (30 s to a first token) but not growing: the service, not a queue.
  CHECK_FALSE(backlog_trend(arrivals(100, 30.0, 0.01), 100, 0, 99 * kNsPerSec).falling_behind);
  // Growing by 4x but under a second in all: noise of a light load.
  CHECK_FALSE(backlog_trend(arrivals(100, 0.01, 0.002), 100, 0, 99 * kNsPerSec).falling_behind);
  std::vector<std::pair<Time, Time>> burst(100, {0, 5 * kNsPerSec});
  const BacklogTrend b = backlog_trend(burst, 100, 0, 0);
  CHECK_FALSE(b.falling_behind);
  CHECK(b.offered_rate == 0);
  CHECK_FALSE(backlog_trend(arrivals(12, 0.2, 5.0), 12, 0, 11 * kNsPerSec).falling_behind);  // 3 per quarter
  CHECK_FALSE(backlog_warning(b, 1.0));
}

TEST_CASE("backlog: the collector's summary carries the warning, in any record order, and summary.json only then") {
  MetricsCollector grows, flat;
  for (int i = 99; i >= 0; --i) {  // reverse order: the summary depends on the records, not their order
    grows.add(finished(i, i * kNsPerSec, static_cast<Time>((0.2 + 0.5 * i) * 1e9)));
    flat.add(finished(i, i * kNsPerSec, 200 * kNsPerMs));
  }
  const Summary over = grows.summarize({});
  const Summary ok = flat.summarize({});
  REQUIRE(over.warnings.size() == 1);
  CHECK(over.warnings[0].rfind("overloaded:", 0) == 0);
  CHECK(ok.warnings.empty());
  CHECK(summary_to_json(over).contains("warnings"));
  CHECK_FALSE(summary_to_json(ok).contains("warnings"));
}

}  // namespace twin
