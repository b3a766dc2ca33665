// The collector past its exact limit: histograms instead of every value,
// within the histogram's bound, with the same counts, means and goodput.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

#include "base/error.hpp"
#include "metrics/collector.hpp"
#include "metrics/summary_json.hpp"

using namespace twin;

namespace {

// Log-normal-ish latencies over five decades, a few one-token requests, a
// rejection now and then.
std::vector<RequestRecord> random_requests(int n, std::uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> ttft_ms(3.0, 1.5), tpot_ms(2.5, 0.6);
  std::uniform_int_distribution<int> tokens(1, 40), replica(0, 3);
  std::vector<RequestRecord> out;
  Time arrival = 0;
  for (int i = 0; i < n; ++i) {
    RequestRecord r;
    r.id = i;
    r.replica = replica(rng);
    arrival += 1'000'000 + static_cast<Time>(rng() % 10'000'000);
    r.arrival = arrival;
    r.prompt_tokens = 100;
    if (i % 97 == 5) {
      r.outcome = Outcome::rejected;
      r.finish = arrival;
      out.push_back(r);
      continue;
    }
    r.output_tokens = tokens(rng);
    r.first_token = arrival + static_cast<Time>(ttft_ms(rng) * 1e6);
    Time t = r.first_token;
    for (int k = 1; k < r.output_tokens; ++k) {
      const Time gap = static_cast<Time>(tpot_ms(rng) * 1e6);
      r.itl.push_back(gap);
      t += gap;
    }
    r.finish = t;
    out.push_back(r);
  }
  return out;
}

Summary summarize(const std::vector<RequestRecord>& records, std::uint64_t exact_requests,
                  const std::vector<Slo>& slos) {
  MetricsCollector c(CollectorOptions{exact_requests, slos});
  for (const auto& r : records) c.add(r);
  SummaryContext context;
  context.slos = slos;
  context.num_replicas = 4;
  return c.summarize(context);
}

std::string json_of(const Summary& s) {
  std::ostringstream out;
  write_summary_json(out, s);
  return out.str();
}

void check_close(const LatencyStats& approx, const LatencyStats& exact) {
  CHECK(approx.count == exact.count);
  CHECK(approx.mean == Approx(exact.mean).epsilon(1e-9));
  CHECK(approx.max == Approx(exact.max).epsilon(1e-9));
  // Each order statistic within 2^-8; an interpolated percentile lies
  // between two of them, so within the same bound.
  for (const auto& [a, e] : {std::pair{approx.p50, exact.p50}, {approx.p90, exact.p90}, {approx.p99, exact.p99}}) {
    CHECK(std::abs(a - e) <= e * 1.0 / 256 + 1e-9);
  }
  CHECK(approx.std == Approx(exact.std).epsilon(0.01));
}

}  // namespace

TEST_CASE("past the exact limit percentiles come from histograms within 0.39%") {
  const auto records = random_requests(20'000, 7);
  const auto slos = parse_slos("ttft_p90<=100ms,tpot_p99<=40ms,itl<=60ms,e2el_p50<=400ms");
  const Summary exact = summarize(records, CollectorOptions::kAlwaysExact, slos);
  const Summary streamed = summarize(records, 0, slos);
  CHECK_FALSE(exact.percentiles_streamed);
  CHECK(streamed.percentiles_streamed);
  check_close(streamed.ttft_ms, exact.ttft_ms);
  check_close(streamed.tpot_ms, exact.tpot_ms);
  check_close(streamed.e2el_ms, exact.e2el_ms);
  // ITL was a histogram already: the same bytes.
  CHECK(streamed.itl_ms.p99 == exact.itl_ms.p99);
  // Goodput and each SLO's share are counts: identical.
  CHECK(streamed.good_requests == exact.good_requests);
  CHECK(exact.good_requests > 0);
  CHECK(exact.good_requests < exact.completed);
  REQUIRE(streamed.slos.size() == exact.slos.size());
  for (std::size_t k = 0; k < exact.slos.size(); ++k) {
    CHECK(streamed.slos[k].request_fraction_met == exact.slos[k].request_fraction_met);
  }
  CHECK(streamed.completed == exact.completed);
  CHECK(streamed.duration_s == exact.duration_s);
  // summary.json says which, and only when streamed.
  CHECK(json_of(streamed).find("\"percentiles\": \"histogram\"") != std::string::npos);
  CHECK(json_of(exact).find("\"percentiles\"") == std::string::npos);
}

TEST_CASE("switching to histograms mid-run gives the same summary as histograms from the start") {
  const auto records = random_requests(5'000, 11);
  const auto slos = parse_slos("ttft_p99<=200ms");
  const std::string from_start = json_of(summarize(records, 0, slos));
  CHECK(json_of(summarize(records, 1'000, slos)) == from_start);
  // And whatever the order the records come in.
  auto reversed = records;
  std::reverse(reversed.begin(), reversed.end());
  CHECK(json_of(summarize(reversed, 1'000, slos)) == from_start);
}

TEST_CASE("below the limit the summary is the exact one, byte for byte") {
  const auto records = random_requests(3'000, 5);
  const auto slos = parse_slos("ttft_p90<=100ms");
  const std::string exact = json_of(summarize(records, CollectorOptions::kAlwaysExact, slos));
  CHECK(json_of(summarize(records, CollectorOptions::kDefaultExactRequests, slos)) == exact);
  // The default collector (no options) is the same as well.
  MetricsCollector plain;
  for (const auto& r : records) plain.add(r);
  SummaryContext context;
  context.slos = slos;
  context.num_replicas = 4;
  CHECK(json_of(plain.summarize(context)) == exact);
}

TEST_CASE("streaming goodput needs the SLOs when the collector is made") {
  MetricsCollector c(CollectorOptions{0, {}});
  for (const auto& r : random_requests(10, 1)) c.add(r);
  SummaryContext context;
  context.slos = parse_slos("ttft_p90<=1s");
  CHECK_THROWS_WITH(c.summarize(context), Catch::Matchers::Contains("SLOs must be given"));
}
