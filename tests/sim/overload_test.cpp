// Overload control in the simulator: the core's max_queued_requests and
// max_queue_time_ms shed an overloaded trace; unset (or 0) they change nothing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "sim_test_util.hpp"

using namespace twin;
using namespace twin::test;

namespace {

// 300 requests 1 ms apart on one replica holding ~2 of them at a time: far
// more than it can serve.
ListSource overload_trace() {
  ListSource s;
  for (int i = 0; i < 300; ++i) {
    Request r;
    r.id = i;
    r.arrival = i * kNsPerMs;
    r.prompt_len = 1000;
    r.output_len = 200;
    s.requests.push_back(r);
  }
  return s;
}

CollectSink run_overload(const OptionList& options) {
  ClusterConfig config = one_group("llama-3.1-8b", "h100-80gb");
  config.num_gpu_blocks_override = 200;
  config.scheduler_options = options;
  Cluster cluster = build_cluster(config);
  SimOptions sim_options;
  sim_options.record_steps = true;
  Simulator sim(std::move(cluster.replicas), sim_options);
  ListSource src = overload_trace();
  CollectSink sink;
  sim.run(src, sink);
  return sink;
}

std::int64_t count_reason(const CollectSink& sink, const std::string& reason) {
  return std::count_if(sink.requests.begin(), sink.requests.end(),
                       [&](const RequestRecord& r) { return r.outcome == Outcome::rejected && r.reason == reason; });
}

bool same_records(const CollectSink& a, const CollectSink& b) {
  if (a.requests.size() != b.requests.size() || a.steps.size() != b.steps.size()) return false;
  for (std::size_t i = 0; i < a.requests.size(); ++i) {
    const RequestRecord& x = a.requests[i];
    const RequestRecord& y = b.requests[i];
    if (x.id != y.id || x.outcome != y.outcome || x.reason != y.reason || x.first_token != y.first_token ||
        x.finish != y.finish || x.output_tokens != y.output_tokens || x.itl != y.itl) {
      return false;
    }
  }
  for (std::size_t i = 0; i < a.steps.size(); ++i) {
    if (a.steps[i].start != b.steps[i].start || a.steps[i].duration != b.steps[i].duration ||
        a.steps[i].new_tokens != b.steps[i].new_tokens || a.steps[i].waiting != b.steps[i].waiting) {
      return false;
    }
  }
  return true;
}

}  // namespace

TEST_CASE("an overloaded trace queues everything without limits, and the same with the limits at 0") {
  const CollectSink plain = run_overload({});
  REQUIRE(plain.requests.size() == 300);
  for (const auto& r : plain.requests) CHECK(r.outcome == Outcome::finished);
  std::int32_t max_waiting = 0;
  for (const auto& s : plain.steps) max_waiting = std::max(max_waiting, s.waiting);
  CHECK(max_waiting > 100);
  const CollectSink zero = run_overload({{"max_queued_requests", "0"}, {"max_queue_time_ms", "0"}});
  CHECK(same_records(plain, zero));
}

TEST_CASE("max_queued_requests sheds an overloaded trace at arrival") {
  const CollectSink plain = run_overload({});
  const CollectSink sink = run_overload({{"max_queued_requests", "8"}});
  REQUIRE(sink.requests.size() == 300);
  const std::int64_t full = count_reason(sink, "queue full");
  CHECK(full > 100);
  std::int64_t finished = 0;
  for (const auto& r : sink.requests) {
    if (r.outcome == Outcome::rejected) {
      CHECK(r.reason == "queue full");
      CHECK(r.finish == r.arrival);  // at once
    } else {
      CHECK(r.outcome == Outcome::finished);
      ++finished;
    }
  }
  CHECK(finished + full == 300);
  // Arrivals stop at 8 waiting; recompute preemption may put back up to the
  // running requests (3 fit in 200 blocks) on top.
  for (const auto& s : sink.steps) CHECK(s.waiting <= 8 + 3);
  // Shedding bounds the wait of what is served.
  auto worst_ttft = [](const CollectSink& c) {
    Time worst = 0;
    for (const auto& r : c.requests) {
      if (r.outcome == Outcome::finished) worst = std::max(worst, r.first_token - r.arrival);
    }
    return worst;
  };
  CHECK(worst_ttft(sink) * 4 < worst_ttft(plain));
}

TEST_CASE("max_queue_time_ms rejects what waits too long and serves the rest in time") {
  const CollectSink sink = run_overload({{"max_queue_time_ms", "500"}});
  REQUIRE(sink.requests.size() == 300);
  const std::int64_t timed_out = count_reason(sink, "queue timeout");
  CHECK(timed_out > 100);
  for (const auto& r : sink.requests) {
    if (r.outcome == Outcome::rejected) {
      CHECK(r.reason == "queue timeout");
      CHECK(r.finish - r.arrival >= 500 * kNsPerMs);
      CHECK(r.output_tokens == 0);
    } else {
      CHECK(r.outcome == Outcome::finished);
      CHECK(r.output_tokens == 200);
    }
  }
}

TEST_CASE("the overload limits give the same bytes run after run") {
  const OptionList both{{"max_queued_requests", "16"}, {"max_queue_time_ms", "300"}};
  const CollectSink a = run_overload(both);
  const CollectSink b = run_overload(both);
  CHECK(same_records(a, b));
  CHECK(count_reason(a, "queue full") + count_reason(a, "queue timeout") > 0);
}
