#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "base/error.hpp"
#include "metrics/collector.hpp"
#include "metrics/result_sink.hpp"
#include "metrics/summary_json.hpp"
#include "records_fixture.hpp"

using namespace twin;

namespace {
Summary summarize_hand_run(const std::string& slos, std::int32_t num_replicas = 3) {
  MetricsCollector c;
  for (const auto& r : test::hand_requests()) c.add(r);
  for (const auto& s : test::hand_steps()) c.add(s);
  SummaryContext context;
  context.slos = parse_slos(slos);
  context.num_replicas = num_replicas;
  return c.summarize(context);
}
}  // namespace

TEST_CASE("collector counts outcomes and computes latencies as defined") {
  const Summary s = summarize_hand_run("");
  CHECK(s.num_requests == 5);
  CHECK(s.completed == 3);
  CHECK(s.rejected == 1);
  CHECK(s.aborted == 1);

  CHECK(s.ttft_ms.count == 3);  // completed requests only
  CHECK(s.ttft_ms.mean == Approx((100.0 + 500 + 50) / 3));
  // Population standard deviation, as numpy's default and vLLM's benchmark.
  CHECK(s.ttft_ms.std == Approx(std::sqrt(((100.0 - 650.0 / 3) * (100.0 - 650.0 / 3) + (500.0 - 650.0 / 3) * (500.0 - 650.0 / 3) +
                                           (50.0 - 650.0 / 3) * (50.0 - 650.0 / 3)) / 3)));
  const double itl_mean = 2000.0 / 12;  // ten gaps of 100 ms, then 200 and 800 (the histogram: within its buckets)
  CHECK(s.itl_ms.std == Approx(std::sqrt((10 * (100 - itl_mean) * (100 - itl_mean) + (200 - itl_mean) * (200 - itl_mean) +
                                          (800 - itl_mean) * (800 - itl_mean)) / 12)).epsilon(0.01));
  CHECK(s.ttft_ms.p50 == Approx(100));
  CHECK(s.ttft_ms.p90 == Approx(420));  // sorted 50, 100, 500; rank 1.8
  CHECK(s.ttft_ms.max == Approx(500));
  CHECK(s.tpot_ms.count == 2);          // one-token request has no TPOT
  CHECK(s.tpot_ms.mean == Approx(300));
  CHECK(s.tpot_ms.p50 == Approx(300));
  CHECK(s.e2el_ms.max == Approx(1500));
  CHECK(s.e2el_ms.p50 == Approx(1100));
  CHECK(s.itl_ms.count == 12);
  CHECK(s.itl_ms.mean == Approx(2000.0 / 12));
  CHECK(s.itl_ms.max == Approx(800));
  CHECK(s.itl_ms.p50 == Approx(100).epsilon(0.005));

  CHECK(s.duration_s == Approx(4));  // first arrival 0 to the abort at 4 s
  CHECK(s.request_throughput == Approx(0.75));
  CHECK(s.total_output_tokens == 15);
  CHECK(s.output_throughput == Approx(3.75));
  CHECK(s.input_throughput == Approx(150));
  CHECK(s.total_token_throughput == Approx(153.75));
  CHECK(s.prefix_cache_hit_rate == Approx(0.25));
  CHECK(s.preemptions == 2);

  CHECK(s.num_steps == 2);
  CHECK(s.mean_kv_blocks_used == Approx(20));
  CHECK(s.max_kv_blocks_used == 30);
  CHECK(s.mean_batch_size == Approx(3));
  CHECK(s.max_batch_size == 4);
}

TEST_CASE("goodput counts completed requests meeting every SLO's per-request threshold") {
  // r0 (TTFT 100, TPOT 100) meets both; r1 (500, 500) fails; r2 (50, no TPOT) meets both.
  Summary s = summarize_hand_run("ttft<=200ms,tpot<=200ms");
  CHECK(s.good_requests == 2);
  CHECK(s.goodput == Approx(0.5));  // 2 over 4 s
  REQUIRE(s.slos.size() == 2);
  CHECK(s.slos[0].request_fraction_met == Approx(0.4));  // 2 of 5: rejected and aborted fail
  CHECK(std::isnan(s.slos[0].measured_ms));

  // ITL compares each request's largest gap: r1's 800 ms fails 500 ms.
  s = summarize_hand_run("itl<=500ms");
  CHECK(s.good_requests == 2);
  s = summarize_hand_run("itl<=900ms,e2el<=1200ms");
  CHECK(s.good_requests == 2);  // r1's E2E 1500 fails
  s = summarize_hand_run("e2el<=10s");
  CHECK(s.good_requests == 3);
  CHECK(s.goodput == Approx(0.75));
}

TEST_CASE("percentile SLO attainment compares the measured percentile with the threshold") {
  const Summary s = summarize_hand_run("ttft_p50<=100ms,ttft_p90<=400ms,itl_p50<=101ms,tpot_p99<=1s");
  REQUIRE(s.slos.size() == 4);
  CHECK(s.slos[0].measured_ms == Approx(100));
  CHECK(s.slos[0].percentile_met);  // equal is within
  CHECK(s.slos[1].measured_ms == Approx(420));
  CHECK_FALSE(s.slos[1].percentile_met);
  CHECK(s.slos[2].percentile_met);
  CHECK(s.slos[3].measured_ms == Approx(496));  // 100 + 0.99 * 400
  CHECK(s.slos[3].percentile_met);
  CHECK(s.good_requests == 2);  // per request, ttft<=100ms fails r1; r0 and r2 meet all
}

TEST_CASE("replica load spread includes idle replicas") {
  const Summary s = summarize_hand_run("", 3);
  REQUIRE(s.replicas.size() == 3);
  CHECK(s.replicas[0].requests == 2);
  CHECK(s.replicas[1].requests == 3);
  CHECK(s.replicas[2].requests == 0);
  CHECK(s.replicas[0].tokens == 100 + 11 + 300 + 1);
  CHECK(s.replicas[1].tokens == 200 + 3 + 10 + 2);  // the rejected 5000-token prompt is not load
  CHECK(s.replica_requests.min == 0);
  CHECK(s.replica_requests.max == 3);
  CHECK(s.replica_requests.mean == Approx(5.0 / 3));
  // population std of {2, 3, 0} = sqrt(14/9 - ...) : mean 5/3, squares (1/9 + 16/9 + 25/9)/3 = 14/9
  CHECK(s.replica_requests.cv == Approx(std::sqrt(14.0 / 9) / (5.0 / 3)));
  CHECK(summarize_hand_run("", 0).replicas.size() == 2);
}

TEST_CASE("replica load: a handed-off request loads its prefill and its decode replica") {
  MetricsCollector c;
  RequestRecord r;
  r.id = 1;
  r.replica = 2;          // decode replica
  r.prefill_replica = 0;  // prefill replica
  r.arrival = 0;
  r.first_token = 10 * kNsPerMs;
  r.finish = 50 * kNsPerMs;
  r.prompt_tokens = 400;
  r.output_tokens = 5;
  c.add(r);
  SummaryContext context;
  context.num_replicas = 3;
  const Summary s = c.summarize(context);
  REQUIRE(s.replicas.size() == 3);
  CHECK(s.replicas[0].requests == 1);
  CHECK(s.replicas[0].tokens == 400);
  CHECK(s.replicas[1].requests == 0);
  CHECK(s.replicas[2].requests == 1);
  CHECK(s.replicas[2].tokens == 5);
}

TEST_CASE("the summary does not depend on the order records arrive in") {
  auto records = test::hand_requests();
  MetricsCollector forward, backward;
  for (const auto& r : records) forward.add(r);
  std::reverse(records.begin(), records.end());
  for (const auto& r : records) backward.add(r);
  SummaryContext context;
  context.slos = parse_slos("ttft_p90<=1s,itl<=500ms");
  CHECK(summary_to_json(forward.summarize(context)).dump() == summary_to_json(backward.summarize(context)).dump());
}

TEST_CASE("an empty run summarises to zeros and nulls without failing") {
  MetricsCollector c;
  const Summary s = c.summarize({});
  CHECK(s.num_requests == 0);
  CHECK(std::isnan(s.ttft_ms.p50));
  CHECK(s.request_throughput == 0);
  const auto j = summary_to_json(s);
  CHECK(j["ttft_ms"]["p50"].is_null());
}

TEST_CASE("impossible records are errors naming the request") {
  MetricsCollector c;
  auto r = test::hand_requests()[0];
  r.finish = -5;
  CHECK_THROWS_WITH(c.add(r), Catch::Matchers::Contains("request record 0") && Catch::Matchers::Contains("finish"));
  r = test::hand_requests()[1];
  r.itl = {1};
  CHECK_THROWS_WITH(c.add(r), Catch::Matchers::Contains("1 inter-token gaps for 3 output tokens"));
  r = test::hand_requests()[0];
  r.first_token = kNoTime;
  CHECK_THROWS_AS(c.add(r), Error);
  CHECK(c.summarize({}).num_requests == 0);  // nothing half-added
}

TEST_CASE("step figures from a tally equal those from the records, and the sink counts steps from the tally only") {
  MetricsCollector by_records;
  StepTally tally;
  for (const auto& s : test::hand_steps()) {
    by_records.add(s);
    tally.add(s);
  }
  // Split in two and merged, in either order: the same tally.
  StepTally first, second;
  const auto steps = test::hand_steps();
  first.add(steps.front());
  for (std::size_t i = 1; i < steps.size(); ++i) second.add(steps[i]);
  second.merge(first);
  MetricsCollector by_tally, by_merged;
  by_tally.add(tally);
  by_merged.add(second);
  // A ResultSink writes step records but counts the loop's tally.
  MetricsCollector through_sink;
  ResultSink sink(through_sink, nullptr, nullptr);
  for (const auto& s : steps) sink.on_step(s);
  CHECK(through_sink.summarize(SummaryContext{}).num_steps == 0);
  sink.on_step_tally(tally);
  for (const MetricsCollector* c : {&by_tally, &by_merged, &through_sink}) {
    const Summary a = by_records.summarize(SummaryContext{}), b = c->summarize(SummaryContext{});
    CHECK(b.num_steps == a.num_steps);
    CHECK(b.mean_kv_blocks_used == a.mean_kv_blocks_used);
    CHECK(b.max_kv_blocks_used == a.max_kv_blocks_used);
    CHECK(b.mean_batch_size == a.mean_batch_size);
    CHECK(b.max_batch_size == a.max_batch_size);
  }
  CHECK(by_tally.summarize(SummaryContext{}).num_steps == 2);
}
