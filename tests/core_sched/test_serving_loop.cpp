// The one serving loop over a clock made for the test: every step lasts a
// fixed time, and the clock may ask to stop after some steps. No clock is
// read: the loop's time is the test clock's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "engine/core/record_stream.hpp"
#include "engine/core/serving_loop.hpp"
#include "engine/core/timeline.hpp"
#include "tests/core_sched/sched_test_util.hpp"

namespace twin::test {
namespace {

class FixedStepClock {
 public:
  explicit FixedStepClock(Time step, std::int64_t stop_after_steps = -1)
      : step_(step), stop_after_(stop_after_steps) {}
  bool stop_requested() const { return stop_after_ >= 0 && steps_ >= stop_after_; }
  bool wait_until(Time t) {
    waits.push_back(t);
    return !stop_requested();
  }
  Time read(Time now) const { return now + 7; }
  void admit(Request& request, const Replica&) { admitted.push_back(request.id); }
  StepTiming run_step(std::int32_t, const StepPlan&, const Replica&, Time now, StepResult&) {
    ++steps_;
    return StepTiming{now + step_, now + step_};
  }
  void on_ended(const RequestRecord& record) { ended.push_back(record.id); }

  std::vector<Time> waits;
  std::vector<RequestId> admitted, ended;

 private:
  Time step_;
  std::int64_t stop_after_;
  std::int64_t steps_ = 0;
};
static_assert(ServingClock<FixedStepClock>);

class Collect final : public RecordSink {
 public:
  void on_request(const RequestRecord& r) override { requests.push_back(r); }
  void on_step(const StepRecord& s) override { steps.push_back(s); }
  void on_step_tally(const StepTally& t) override { tallies.push_back(t); }
  std::vector<RequestRecord> requests;
  std::vector<StepRecord> steps;
  std::vector<StepTally> tallies;
};

const RequestRecord& record_of(const Collect& sink, RequestId id) {
  for (const RequestRecord& r : sink.requests) {
    if (r.id == id) return r;
  }
  FAIL("no record for request " << id);
  return sink.requests.front();
}

}  // namespace

TEST_CASE("the serving loop serves arrivals on the clock's time and waits for each instant") {
  // Synchronous scheduling: an arrival is planned when the step in flight
  // completes (async scheduling's extra step is test_vllm_behaviours').
  ReplicaConfig config = config_for("vllm", 64);
  config.scheduler.async_scheduling = false;
  Replica replica(config, 0);
  FixedStepClock clock(kNsPerMs);
  ServingOptions options;
  options.record_steps = true;
  ServingLoop<FixedStepClock> loop(std::span<Replica>(&replica, 1), clock, options);
  // The second request arrives while the first one's steps run; the third long after.
  VectorSource source({make_request(0, 8, 3, 0), make_request(1, 8, 2, kNsPerMs / 2),
                       make_request(2, 8, 1, 100 * kNsPerMs)});
  Collect sink;
  const ServingStats stats = loop.run(source, sink);
  REQUIRE(sink.requests.size() == 3);
  for (const RequestRecord& r : sink.requests) CHECK(r.outcome == Outcome::finished);
  CHECK(clock.admitted == std::vector<RequestId>{0, 1, 2});
  CHECK(clock.ended.size() == 3);
  CHECK(stats.arrivals == 3);
  CHECK(stats.steps == static_cast<std::int64_t>(sink.steps.size()));
  CHECK(stats.unserved == 0);
  CHECK_FALSE(stats.stopped);
  // Request 1 is queued as of its arrival, planned when the step in flight completes.
  CHECK(record_of(sink, 1).arrival == kNsPerMs / 2);
  CHECK(record_of(sink, 1).first_token == 2 * kNsPerMs);
  // Idle until request 2: the loop waited for that instant, then served it at once.
  CHECK(std::find(clock.waits.begin(), clock.waits.end(), 100 * kNsPerMs) != clock.waits.end());
  CHECK(record_of(sink, 2).first_token == 101 * kNsPerMs);
  CHECK(stats.end_time == 101 * kNsPerMs);
}

TEST_CASE("a stopped loop starts no step, ends the requests in flight as interrupted and takes in no more") {
  Replica replica(config_for("vllm", 64), 0);
  FixedStepClock clock(kNsPerMs, 2);
  ServingLoop<FixedStepClock> loop(std::span<Replica>(&replica, 1), clock, ServingOptions{});
  VectorSource source({make_request(0, 8, 50, 0), make_request(1, 8, 50, 0), make_request(2, 8, 5, kNsPerSec)});
  Collect sink;
  const ServingStats stats = loop.run(source, sink);
  CHECK(stats.stopped);
  CHECK(stats.steps == 2);
  CHECK(stats.interrupted == 2);
  CHECK(stats.arrivals == 2);  // request 2 was not due yet: it never arrived
  REQUIRE(sink.requests.size() == 2);
  for (const RequestRecord& r : sink.requests) {
    CHECK(r.outcome == Outcome::aborted);
    CHECK(r.reason == "interrupted");
    CHECK(r.finish == 2 * kNsPerMs + 7);  // the clock's reading at the stop
  }
  CHECK_FALSE(replica.has_work());
}

TEST_CASE("a loop stopped after its last arrival (run --asap) still ends its requests as interrupted") {
  // Every request is due at 0, so once they are in, only the steps' own
  // events remain: a stop left the queue empty and the loop ended them as
  // "aborted", unmarked (run --asap exited 0).
  Replica replica(config_for("vllm", 64), 0);
  FixedStepClock clock(kNsPerMs, 2);
  ServingLoop<FixedStepClock> loop(std::span<Replica>(&replica, 1), clock, ServingOptions{});
  VectorSource source({make_request(0, 8, 50, 0), make_request(1, 8, 50, 0)});
  Collect sink;
  const ServingStats stats = loop.run(source, sink);
  CHECK(stats.stopped);
  CHECK(stats.interrupted == 2);
  CHECK(stats.unserved == 0);
  REQUIRE(sink.requests.size() == 2);
  for (const RequestRecord& r : sink.requests) CHECK(r.reason == "interrupted");
}

TEST_CASE("abort_all ends every live request in id order with the reason given") {
  Replica replica(config_for("vllm", 64), 0);
  replica.add(make_request(5, 8, 4), 0);
  replica.add(make_request(3, 8, 4), 0);
  (void)step(replica, 0);
  replica.add(make_request(9, 8, 4), kNsPerMs);
  CHECK(replica.abort_all(2 * kNsPerMs, "interrupted") == 3);
  const std::vector<RequestRecord> ended = replica.take_finished();
  REQUIRE(ended.size() == 3);
  CHECK(ended[0].id == 3);
  CHECK(ended[1].id == 5);
  CHECK(ended[2].id == 9);
  for (const RequestRecord& r : ended) {
    CHECK(r.reason == "interrupted");
    CHECK(r.finish == 2 * kNsPerMs);
  }
  CHECK_FALSE(replica.has_work());
  CHECK(replica.abort_all(3 * kNsPerMs) == 0);
}

TEST_CASE("a source out of arrival order is an error naming the request") {
  Replica replica(config_for("vllm", 64), 0);
  FixedStepClock clock(kNsPerMs);
  ServingLoop<FixedStepClock> loop(std::span<Replica>(&replica, 1), clock, ServingOptions{});
  VectorSource source({make_request(0, 8, 2, 2 * kNsPerSec), make_request(1, 8, 2, kNsPerSec)});
  Collect sink;
  try {
    (void)loop.run(source, sink);
    FAIL("no error");
  } catch (const Error& e) {
    const std::string what = e.what();
    CHECK(what.find("request 1 arrives at 1.000000000 s") != std::string::npos);
    CHECK(what.find("2.000000000 s") != std::string::npos);
  }
}

TEST_CASE("a replayed source scales arrivals and cancel times alike, or sends everything at once") {
  Request r = make_request(0, 8, 2, 2 * kNsPerSec);
  r.cancel_time = 2 * kNsPerSec + 5 * kNsPerMs;
  VectorSource fast_input({r});
  ReplayedSource fast(fast_input, ReplayedSource::Mode::faster, 1000.0);
  Request out;
  REQUIRE(fast.next(out));
  CHECK(out.arrival == 2 * kNsPerMs);
  CHECK(out.cancel_time == 2 * kNsPerMs + 5 * kNsPerUs);
  CHECK_FALSE(fast.next(out));
  VectorSource burst_input({r});
  ReplayedSource burst(burst_input, ReplayedSource::Mode::at_once);
  REQUIRE(burst.next(out));
  CHECK(out.arrival == 0);
  CHECK(out.cancel_time == 5 * kNsPerMs);
  VectorSource none({});
  CHECK_THROWS_AS(ReplayedSource(none, ReplayedSource::Mode::faster, 0.0), UsageError);
}

TEST_CASE("the loop hands the sink one tally of every step, the same whether step records are passed on or not") {
  auto serve = [](bool record_steps, Collect& sink) {
    std::vector<Replica> replicas;
    replicas.emplace_back(config_for("vllm", 64), 0);
    replicas.emplace_back(config_for("vllm", 64), 1);
    FixedStepClock clock(kNsPerMs);
    ServingOptions options;
    options.record_steps = record_steps;
    options.router = "round_robin";
    ServingLoop<FixedStepClock> loop(replicas, clock, options);
    VectorSource source({make_request(0, 40, 6, 0), make_request(1, 8, 3, 0), make_request(2, 24, 9, kNsPerMs),
                         make_request(3, 8, 4, 2 * kNsPerMs), make_request(4, 60, 2, 3 * kNsPerMs)});
    return loop.run(source, sink);
  };
  Collect with, without;
  const ServingStats a = serve(true, with);
  const ServingStats b = serve(false, without);
  CHECK(without.steps.empty());
  REQUIRE(with.tallies.size() == 1);
  REQUIRE(without.tallies.size() == 1);
  // The tally is what the records add up to.
  StepTally from_records;
  for (const StepRecord& s : with.steps) from_records.add(s);
  const std::vector<const StepTally*> tallies{&with.tallies[0], &without.tallies[0], &a.step_tally, &b.step_tally};
  for (const StepTally* t : tallies) {
    CHECK(t->steps == from_records.steps);
    CHECK(t->steps == static_cast<std::uint64_t>(a.steps));
    CHECK(t->batch_size_sum == from_records.batch_size_sum);
    CHECK(t->kv_blocks_sum == from_records.kv_blocks_sum);
    CHECK(t->batch_size_max == from_records.batch_size_max);
    CHECK(t->kv_blocks_max == from_records.kv_blocks_max);
  }
  CHECK(from_records.steps > 4);
  CHECK(from_records.batch_size_max >= 2);
}

}  // namespace twin::test
