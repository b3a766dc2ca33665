// Overload control (max_queued_requests, max_queue_time_ms) and the cancel
// rule at step completion: a step that completes at or after a request's
// cancel time does not count its work for that request.
#include <catch2/catch.hpp>

#include "base/error.hpp"
#include "engine/core/scheduler_config.hpp"
#include "tests/core_sched/sched_test_util.hpp"

namespace twin::test {
namespace {

const RequestRecord* find_record(const std::vector<RequestRecord>& recs, RequestId id) {
  for (const auto& r : recs) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("overload keys parse, default to off and are validated", "[overload]") {
  ReplicaConfig c = config_for("vllm", 100);
  CHECK(c.scheduler.max_queued_requests == 0);
  CHECK(c.scheduler.max_queue_time == 0);
  set_replica_option(c, "max_queued_requests", "5");
  CHECK(c.scheduler.max_queued_requests == 5);
  set_replica_option(c, "max_waiting_requests", "7");  // alias
  CHECK(c.scheduler.max_queued_requests == 7);
  set_replica_option(c, "max_queue_time_ms", "2.5");
  CHECK(c.scheduler.max_queue_time == 2'500'000);
  CHECK_THROWS_AS(set_replica_option(c, "max_queued_requests", "-1"), UsageError);
  CHECK_THROWS_AS(set_replica_option(c, "max_queue_time_ms", "nan"), UsageError);
  CHECK_THROWS_AS(set_replica_option(c, "max_queue_time_ms", "-3"), UsageError);
  const auto keys = scheduler_option_keys();
  CHECK(std::find(keys.begin(), keys.end(), "max_queued_requests") != keys.end());
  CHECK(std::find(keys.begin(), keys.end(), "max_queue_time_ms") != keys.end());
  c.scheduler.max_queued_requests = -1;
  CHECK_THROWS_AS(validate(c), UsageError);
}

TEST_CASE("max_queued_requests rejects arrivals that find the waiting queue full", "[overload]") {
  ReplicaConfig cfg = config_for("vllm", 100);
  set_replica_option(cfg, "max_queued_requests", "2");
  set_replica_option(cfg, "max_num_seqs", "1");
  Replica r(cfg, 0);
  for (RequestId id = 1; id <= 4; ++id) r.add(make_request(id, 10, 5), 0);
  auto recs = r.take_finished();
  REQUIRE(recs.size() == 2);
  for (RequestId id : {3, 4}) {
    const RequestRecord* rec = find_record(recs, id);
    REQUIRE(rec != nullptr);
    CHECK(rec->outcome == Outcome::rejected);
    CHECK(rec->reason == "queue full");
    CHECK(rec->finish == 0);
  }
  CHECK(r.num_waiting() == 2);
  step(r, 0);  // admits request 1: one place frees up (running requests do not count)
  CHECK(r.num_waiting() == 1);
  r.add(make_request(5, 10, 5), kNsPerMs);
  CHECK(r.take_finished().empty());
  r.add(make_request(6, 10, 5), kNsPerMs);
  recs = r.take_finished();
  REQUIRE(recs.size() == 1);
  CHECK(recs[0].id == 6);
  CHECK(recs[0].reason == "queue full");
}

TEST_CASE("max_queue_time_ms rejects a request never scheduled in time, on a busy replica", "[overload]") {
  ReplicaConfig cfg = config_for("vllm", 100);
  set_replica_option(cfg, "max_queue_time_ms", "10");
  set_replica_option(cfg, "max_num_seqs", "1");
  Replica r(cfg, 0);
  r.add(make_request(1, 10, 100), 0);
  r.add(make_request(2, 10, 5), kNsPerMs);
  CHECK(r.next_wakeup() == 10 * kNsPerMs);  // request 1's queue deadline
  step(r, kNsPerMs);                        // request 1 admitted: its deadline is gone
  CHECK(r.next_wakeup() == 11 * kNsPerMs);  // request 2's
  Time t = kNsPerMs;
  std::vector<RequestRecord> recs;
  while (recs.empty()) {
    step(r, t += kNsPerMs);
    recs = r.take_finished();
  }
  REQUIRE(recs.size() == 1);
  CHECK(recs[0].id == 2);
  CHECK(recs[0].outcome == Outcome::rejected);
  CHECK(recs[0].reason == "queue timeout");
  CHECK(recs[0].finish == 11 * kNsPerMs);
  CHECK(recs[0].output_tokens == 0);
  // Request 1, scheduled within its deadline, runs to the end however long.
  while (r.has_work()) step(r, t += kNsPerMs);
  recs = r.take_finished();
  REQUIRE(recs.size() == 1);
  CHECK(recs[0].outcome == Outcome::finished);
  CHECK(recs[0].output_tokens == 100);
  CHECK(r.kv_cache().num_used_blocks() == 0);
}

TEST_CASE("max_queue_time_ms wakes an idle replica at the deadline", "[overload]") {
  // Dynamic batching waits 50 ms for a batch; the queue timeout is shorter.
  ReplicaConfig cfg = config_for("dynamic", 100);
  set_replica_option(cfg, "max_queue_time_ms", "10");
  Replica r(cfg, 0);
  r.add(make_request(1, 10, 5), 2 * kNsPerMs);
  CHECK(r.plan(2 * kNsPerMs).empty());
  REQUIRE(r.next_wakeup() == 12 * kNsPerMs);
  CHECK(r.plan(12 * kNsPerMs).empty());
  const auto recs = r.take_finished();
  REQUIRE(recs.size() == 1);
  CHECK(recs[0].reason == "queue timeout");
  CHECK(recs[0].finish == 12 * kNsPerMs);
  CHECK(!r.has_work());
  CHECK(r.next_wakeup() == std::nullopt);
}

TEST_CASE("a cancel before the queue deadline is a cancel, and a preempted request is not timed out", "[overload]") {
  ReplicaConfig cfg = config_for("dynamic", 100);
  set_replica_option(cfg, "max_queue_time_ms", "10");
  Replica r(cfg, 0);
  Request a = make_request(1, 10, 5);
  a.cancel_time = 4 * kNsPerMs;
  r.add(a, 0);
  CHECK(r.next_wakeup() == 4 * kNsPerMs);
  const StepPlan p = r.plan(4 * kNsPerMs);
  REQUIRE(p.aborted.size() == 1);
  const auto recs = r.take_finished();
  REQUIRE(recs.size() == 1);
  CHECK(recs[0].outcome == Outcome::aborted);
  CHECK(recs[0].reason == "cancelled");

  // Recompute preemption puts a request back in the queue: it was scheduled
  // once, so the queue timeout no longer applies to it.
  ReplicaConfig tight = config_for("vllm", 4);  // 64 tokens of KV
  set_replica_option(tight, "max_queue_time_ms", "3");
  Replica q(tight, 0);
  q.add(make_request(1, 20, 40), 0);
  q.add(make_request(2, 20, 40), 0);
  Time t = 0;
  bool preempted = false;
  while (q.has_work()) {
    if (!step(q, t, kNsPerMs).preempted.empty()) preempted = true;
    t += kNsPerMs;
  }
  CHECK(preempted);
  for (const auto& rec : q.take_finished()) {
    CHECK(rec.outcome == Outcome::finished);
    CHECK(rec.output_tokens == 40);
  }
}

TEST_CASE("a step completing at or after a cancel time does not count for that request", "[cancel]") {
  Replica r(config_for("vllm", 100), 0);
  Request a = make_request(1, 10, 100);
  a.cancel_time = 5 * kNsPerMs + 500 * kNsPerUs;  // falls inside the step [5 ms, 6 ms)
  r.add(a, 0);
  Request b = make_request(2, 10, 100);
  b.cancel_time = 3 * kNsPerMs;  // exactly at a step's completion
  r.add(b, 0);
  Time t = 0;
  std::vector<RequestRecord> recs;
  for (; t < 10 * kNsPerMs; t += kNsPerMs) {
    const StepPlan p = step(r, t);
    for (const auto& q : p.seqs) {
      // Never scheduled once its cancel time has passed.
      if (q.id == 1) CHECK(t < a.cancel_time);
      if (q.id == 2) CHECK(t < b.cancel_time);
    }
    for (auto& rec : r.take_finished()) recs.push_back(std::move(rec));
  }
  REQUIRE(recs.size() == 2);
  const RequestRecord* rb = find_record(recs, 2);
  const RequestRecord* ra = find_record(recs, 1);
  REQUIRE((ra != nullptr && rb != nullptr));
  // b: steps completing at 1 and 2 ms count; the one completing at 3 ms does not.
  CHECK(rb->outcome == Outcome::aborted);
  CHECK(rb->reason == "cancelled");
  CHECK(rb->output_tokens == 2);
  CHECK(rb->itl.size() == 1);
  CHECK(rb->finish == 3 * kNsPerMs);
  // a: steps completing at 1..5 ms count; the one completing at 6 ms does not.
  CHECK(ra->outcome == Outcome::aborted);
  CHECK(ra->output_tokens == 5);
  CHECK(ra->finish == 6 * kNsPerMs);
  CHECK(ra->first_token < a.cancel_time);
  CHECK(r.kv_cache().num_used_blocks() == 0);
  CHECK(r.next_wakeup() == std::nullopt);
}

TEST_CASE("a request whose last token lands after its cancel time is cancelled, not finished", "[cancel]") {
  Replica r(config_for("vllm", 100), 0);
  Request a = make_request(1, 10, 3);
  a.cancel_time = 2 * kNsPerMs + 1;
  r.add(a, 0);
  step(r, 0);               // first token at 1 ms
  step(r, kNsPerMs);        // second at 2 ms
  step(r, 2 * kNsPerMs);    // the third would land at 3 ms, past the cancel
  const auto recs = r.take_finished();
  REQUIRE(recs.size() == 1);
  CHECK(recs[0].outcome == Outcome::aborted);
  CHECK(recs[0].output_tokens == 2);
  CHECK(!r.has_work());
}

}  // namespace twin::test
