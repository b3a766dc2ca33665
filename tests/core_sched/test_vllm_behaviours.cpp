// vLLM v1 behaviours the vllm preset turns on (scheduler.md): async
// scheduling's one-step admission lag, caching of a request's own generated
// blocks, and the full-prompt admission check (scheduler_reserve_full_isl).
#include <catch2/catch.hpp>

#include "tests/core_sched/sched_test_util.hpp"

namespace twin::test {
namespace {

bool has(const StepPlan& p, RequestId id) { return find_seq(p, id) != nullptr; }

}  // namespace

TEST_CASE("vllm preset turns async scheduling and the full-prompt check on", "[vllm]") {
  const ReplicaConfig v = replica_preset("vllm");
  CHECK(v.scheduler.async_scheduling);
  CHECK(v.scheduler.admission_reserve == "prompt");
  CHECK(v.kv.cache_generated_blocks);
  CHECK_FALSE(replica_preset("sarathi").scheduler.async_scheduling);
  CHECK(replica_preset("vllm-v0").scheduler.admission_reserve == "chunk");
  CHECK(replica_preset("trtllm").scheduler.admission_reserve == "sequence");
  CHECK_FALSE(replica_preset("sglang").scheduler.decode_first);
}

TEST_CASE("async scheduling: an arrival during a step is admitted one step later", "[vllm][async]") {
  for (const bool async : {true, false}) {
    auto cfg = config_for("vllm", 100);
    cfg.scheduler.async_scheduling = async;
    Replica r(cfg, 0);
    r.add(make_request(1, 32, 20), 0);
    // Back to back steps of 10 ms: [0,10) [10,20) [20,30) ...
    StepPlan p = r.plan(0);
    REQUIRE(has(p, 1));
    r.add(make_request(2, 32, 20), 5 * kNsPerMs);  // arrives during the first step
    r.complete(p, StepResult{}, 10 * kNsPerMs);
    p = r.plan(10 * kNsPerMs);
    // With async scheduling this plan was made as the first step started
    // (t = 0), before request 2 arrived.
    CHECK(has(p, 2) == !async);
    r.complete(p, StepResult{}, 20 * kNsPerMs);
    p = r.plan(20 * kNsPerMs);
    CHECK(has(p, 2));
    CAPTURE(async);
  }
}

TEST_CASE("async scheduling: an idle engine, or an empty plan, admits at once", "[vllm][async]") {
  Replica r(config_for("vllm", 100), 0);
  r.add(make_request(1, 32, 1), 0);
  StepPlan p = r.plan(0);
  r.add(make_request(2, 32, 4), 5 * kNsPerMs);
  r.complete(p, StepResult{}, 10 * kNsPerMs);  // request 1 is done: nothing else runs
  p = r.plan(10 * kNsPerMs);
  // The plan made at t = 0 would have been empty; the engine plans again.
  REQUIRE(has(p, 2));
  r.complete(p, StepResult{}, 20 * kNsPerMs);
  // Idle gap: an arrival long after the last step is admitted at once.
  for (Time t = 20 * kNsPerMs; r.has_work() && t < kNsPerSec; t += kNsPerMs) step(r, t);
  REQUIRE_FALSE(r.has_work());
  r.add(make_request(3, 32, 4), kNsPerSec);
  CHECK(has(r.plan(kNsPerSec), 3));
}

TEST_CASE("a request preempted by recompute hits its own generated blocks", "[vllm][own-blocks]") {
  for (const bool own : {true, false}) {
    CAPTURE(own);
    auto cfg = config_for("vllm", 6);
    cfg.scheduler.async_scheduling = false;
    cfg.kv.cache_generated_blocks = own;
    Replica r(cfg, 0);
    r.add(make_request(1, 16, 40), 0);   // 56 tokens: 4 blocks at most
    r.add(make_request(2, 16, 60), 0);
    Time t = 0;
    StepPlan p;
    for (int i = 0; i < 60 && p.preempted.empty(); ++i) p = step(r, t += kNsPerMs);
    // Both hold 3 blocks (48 tokens computed) when request 1 needs a fourth.
    REQUIRE(p.preempted == std::vector<RequestId>{2});
    // Its blocks were freed tail first: request 1's fourth block evicts the
    // tail, the first two stay cached until 2 comes back (after 1 finishes:
    // its 49 known tokens need 4 blocks).
    const ScheduledSeq* back = nullptr;
    while (r.has_work() && back == nullptr) {
      p = step(r, t += kNsPerMs);
      back = find_seq(p, 2);
    }
    REQUIRE(back != nullptr);
    CHECK(back->num_computed + back->num_new == 16 + 33);
    // With own blocks both surviving blocks hit (the prompt's, unnamed by a
    // length-only request, and a generated one); without, nothing does.
    CHECK(back->num_computed == (own ? 32 : 0));
    while (r.has_work()) step(r, t += kNsPerMs);
    CHECK(kv_violation(r).empty());
  }
}

TEST_CASE("full-prompt admission: a chunk is admitted only if the whole prompt would fit", "[vllm][reserve-isl]") {
  for (const bool reserve : {true, false}) {
    CAPTURE(reserve);
    auto cfg = config_for("vllm", 10);  // 160 tokens of KV
    cfg.scheduler.async_scheduling = false;
    cfg.scheduler.max_num_batched_tokens = 64;
    cfg.scheduler.admission_reserve = reserve ? "prompt" : "chunk";
    Replica r(cfg, 0);
    r.add(make_request(1, 64, 40), 0);   // 4 blocks now, growing
    StepPlan p = r.plan(0);
    r.complete(p, StepResult{}, kNsPerMs);
    // Request 1's decode takes a fifth block, leaving 5 free: the 120-token
    // prompt needs 8 in all, its first 63-token chunk only 4.
    r.add(make_request(2, 120, 4), kNsPerMs);
    p = r.plan(kNsPerMs);
    CHECK(has(p, 2) == !reserve);
  }
}

}  // namespace twin::test
