// vLLM v1 behaviours the vllm preset turns on (scheduler.md): async
// scheduling's one-step admission lag, caching of a request's own generated
// blocks, and the full-prompt admission check (scheduler_reserve_full_isl).
#include <catch2/catch.hpp>

#include <algorithm>
#include <utility>

#include "engine/core/policy.hpp"
#include "engine/core/policy_registry.hpp"
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
  CHECK(replica_preset("sglang").scheduler.admission_reserve == "sglang");
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

TEST_CASE("SGLang's admission: prompt and outputs beside the running requests' expected outputs", "[sglang]") {
  auto policy = admission_policies().make("sglang", SchedulerConfig{});
  REQUIRE(policy->running_output_clip() == 4096);
  // A new request: its prompt and all its outputs; the running ones' 1,000
  // outputs still to come at the starting ratio 0.7.
  AdmissionCandidate c{100, 50, 100, 1000};
  CHECK(policy->must_fit(c) == 100 + 50 + 700);
  // A resumed request: what it knows and the outputs it has left.
  CHECK(policy->must_fit(AdmissionCandidate{100, 50, 130, 0}) == 130 + 20);
  // Outputs clip at 4,096, as SGLang's estimate does.
  CHECK(policy->must_fit(AdmissionCandidate{10, 10000, 10, 0}) == 10 + 4096);
  // The ratio falls by (0.7 - 0.098) / 600 per decode step to 0.098 ...
  for (int i = 0; i < 300; ++i) policy->observe(AdmissionStep{false, false, true});
  CHECK(std::abs(policy->must_fit(c) - (150 + 399)) <= 1);  // 1000 x 0.399, rounded down
  for (int i = 0; i < 1000; ++i) policy->observe(AdmissionStep{false, false, true});
  CHECK(policy->must_fit(c) == 150 + 98);
  // ... steps without decodes leave it, idling resets it, and a retraction
  // sets it from the batch: (outputs made + 20 per request) / (outputs + 1).
  policy->observe(AdmissionStep{false, false, false});
  CHECK(policy->must_fit(c) == 150 + 98);
  policy->observe(AdmissionStep{true, false, false});
  CHECK(policy->must_fit(c) == 150 + 700);
  AdmissionStep retract{false, true, true, 380, 999, 1};
  policy->observe(retract);
  CHECK(policy->must_fit(c) == 150 + 400);  // (380 + 20) / 1000
}

TEST_CASE("SGLang's admission keeps room for the running outputs, so it preempts less than vLLM's", "[sglang]") {
  auto run = [](const char* reserve) {
    auto cfg = config_for("sglang", 640);  // 640 tokens of KV (SGLang's page is one token)
    cfg.scheduler.async_scheduling = false;
    cfg.scheduler.admission_reserve = reserve;
    Replica r(cfg, 0);
    for (RequestId id = 1; id <= 12; ++id) r.add(make_request(id, 64, 120), 0);
    Time t = 0;
    std::int32_t most_running = 0;
    while (r.has_work()) {
      StepPlan p = r.plan(t);
      most_running = std::max(most_running, static_cast<std::int32_t>(r.num_running()));
      r.complete(p, StepResult{}, t += kNsPerMs);
    }
    CHECK(kv_violation(r).empty());
    std::int32_t preemptions = 0;
    for (const RequestRecord& rec : r.take_finished()) preemptions += rec.preemptions;
    return std::pair{most_running, preemptions};
  };
  const auto [sglang_running, sglang_preempted] = run("sglang");
  const auto [chunk_running, chunk_preempted] = run("chunk");
  CAPTURE(sglang_running, sglang_preempted, chunk_running, chunk_preempted);
  // 184 tokens a request, 640 of KV: the chunk rule admits ten prompts,
  // which then preempt each other as they grow (4 and 2 preemptions
  // against 10 and 13 when written).
  CHECK(sglang_running < chunk_running);
  CHECK(sglang_preempted < chunk_preempted);
}

}  // namespace twin::test
