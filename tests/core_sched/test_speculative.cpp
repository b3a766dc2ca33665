// Speculative decoding in the core: lookahead slots scheduled after each
// decode, accepted prefixes appended, rejected slots given back.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "base/error.hpp"
#include "tests/core_sched/sched_test_util.hpp"

namespace twin::test {
namespace {

ReplicaConfig spec_config(std::int32_t k, std::int32_t blocks, std::int32_t block_size) {
  ReplicaConfig c = config_for("vllm", blocks);
  c.scheduler.async_scheduling = false;  // arrivals admitted at the next plan: these tests pin lookahead
  c.kv.block_size = block_size;
  set_replica_option(c, "num_speculative_tokens", std::to_string(k));
  return c;
}

// Plans one step at `now` and completes it `duration` later with `accepted`
// proposals accepted for every seq that had lookahead.
StepPlan spec_step(Replica& r, Time now, std::int32_t accepted, Time duration = kNsPerMs) {
  StepPlan p = r.plan(now);
  StepResult result;
  if (p.num_lookahead_tokens() > 0) {
    for (const auto& q : p.seqs) result.accepted.push_back(std::min(accepted, q.num_lookahead));
  }
  if (!p.empty()) r.complete(p, result, now + duration);
  return p;
}

}  // namespace

TEST_CASE("num_speculative_tokens is a replica option, 0 by default, range checked", "[speculative]") {
  ReplicaConfig c = config_for("vllm", 64);
  CHECK(c.scheduler.num_speculative_tokens == 0);
  set_replica_option(c, "num_speculative_tokens", "5");
  CHECK(c.scheduler.num_speculative_tokens == 5);
  CHECK_THROWS_AS(set_replica_option(c, "num_speculative_tokens", "-1"), UsageError);
  CHECK_THROWS_AS(set_replica_option(c, "num_speculative_tokens", "65"), UsageError);
  CHECK_THROWS_AS(set_replica_option(c, "num_speculative_tokens", "two"), UsageError);
}

TEST_CASE("a decode gets k lookahead tokens, capped by the output left, and accepted ones are appended",
          "[speculative]") {
  Replica r(spec_config(3, 64, 4), 0);
  r.set_record_steps(true);
  r.add(make_request(1, 10, 9), 0);
  // The prefill gets no lookahead.
  StepPlan p = spec_step(r, 0, 0);
  REQUIRE(p.seqs.size() == 1);
  CHECK(p.seqs[0].num_new == 10);
  CHECK(p.seqs[0].num_lookahead == 0);
  // Decode: 1 known token + 3 proposals; 1 accepted: 2 tokens out.
  p = spec_step(r, 1 * kNsPerMs, 1);
  CHECK(p.seqs[0].num_computed == 10);
  CHECK(p.seqs[0].num_new == 4);
  CHECK(p.seqs[0].num_lookahead == 3);
  CHECK(p.seqs[0].samples);
  CHECK_FALSE(p.seqs[0].is_prefill);
  auto v = r.seq(1);
  REQUIRE(v);
  CHECK(v->num_output == 3);
  CHECK(v->num_computed == 12);
  // The rejected slots' block went back: 12 tokens need 3 blocks of 4.
  CHECK(v->kv->blocks.size() == 3);
  CHECK(kv_violation(r).empty());
  // All 3 accepted: 4 tokens out (7 in all).
  p = spec_step(r, 2 * kNsPerMs, 3);
  CHECK(p.seqs[0].num_lookahead == 3);
  v = r.seq(1);
  REQUIRE(v);
  CHECK(v->num_output == 7);
  CHECK(v->num_computed == 16);
  // Two tokens left: one known token and one proposal at most.
  p = spec_step(r, 3 * kNsPerMs, 3);
  CHECK(p.seqs[0].num_lookahead == 1);
  CHECK_FALSE(r.seq(1));
  const auto records = r.take_finished();
  REQUIRE(records.size() == 1);
  CHECK(records[0].output_tokens == 9);
  CHECK(records[0].first_token == 1 * kNsPerMs);
  CHECK(records[0].finish == 4 * kNsPerMs);
  // One gap per step, 0 for the tokens that came with it.
  const std::vector<Time> itl = {kNsPerMs, 0, kNsPerMs, 0, 0, 0, kNsPerMs, 0};
  CHECK(records[0].itl == itl);
  const auto steps = r.take_steps();
  REQUIRE(steps.size() == 4);
  CHECK(steps[1].proposed_tokens == 3);
  CHECK(steps[1].accepted_tokens == 1);
  CHECK(steps[1].accepted == std::vector<std::int32_t>{1});
  CHECK(steps[1].new_tokens == 4);
  CHECK(steps[1].num_decode_seqs == 1);
  CHECK(steps[3].proposed_tokens == 1);
  CHECK(steps[3].accepted_tokens == 1);
  CHECK(r.kv_cache().num_free_blocks() == r.kv_cache().num_blocks());
}

TEST_CASE("lookahead counts against the token budget and a prefill chunk gets none", "[speculative]") {
  ReplicaConfig c = spec_config(4, 256, 16);
  set_replica_option(c, "max_num_batched_tokens", "16");
  Replica r(c, 0);
  r.add(make_request(1, 8, 20), 0);
  spec_step(r, 0, 0);  // prefill of request 1
  r.add(make_request(2, 40, 5), 0);
  // Decode of 1 first (1 + 4 tokens), then 11 tokens of 2's prompt: no lookahead for a chunk.
  StepPlan p = spec_step(r, kNsPerMs, 0);
  REQUIRE(p.seqs.size() == 2);
  CHECK(p.seqs[0].num_new == 5);
  CHECK(p.seqs[0].num_lookahead == 4);
  CHECK(p.seqs[1].num_new == 11);
  CHECK(p.seqs[1].num_lookahead == 0);
  CHECK(p.num_batched_tokens() == 16);
  CHECK(kv_violation(r).empty());
}

TEST_CASE("rejected lookahead never releases a shared prefix-cached block", "[speculative]") {
  Replica r(spec_config(6, 64, 4), 0);
  // Two requests share 8 prompt tokens (2 full blocks).
  r.add(make_token_request(1, 9, 12, 7, 8), 0);
  spec_step(r, 0, 0);
  r.add(make_token_request(2, 9, 12, 7, 8), kNsPerMs);
  spec_step(r, kNsPerMs, 0);
  const auto a = r.seq(1), b = r.seq(2);
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(a->kv->blocks.size() >= 2);
  CHECK(a->kv->blocks[0] == b->kv->blocks[0]);
  CHECK(a->kv->blocks[1] == b->kv->blocks[1]);
  for (int i = 0; i < 4; ++i) spec_step(r, (2 + i) * kNsPerMs, 0);  // every proposal rejected
  const auto a2 = r.seq(1);
  REQUIRE(a2);
  CHECK(r.kv_cache().ref_count(a2->kv->blocks[0]) == 2);
  CHECK(r.kv_cache().is_cached(a2->kv->blocks[1]));
  CHECK(kv_violation(r).empty());
}

TEST_CASE("lookahead is dropped before a request is preempted for it", "[speculative]") {
  // 4 blocks of 4 tokens. After both prefills (a block each), request 1
  // decodes with 1 proposal (its output left caps it) into a second block;
  // request 2's 1 + 4 tokens would need 2 more blocks where 1 is free: it
  // decodes plainly instead of preempting itself.
  Replica r(spec_config(4, 4, 4), 0);
  r.add(make_request(1, 4, 3), 0);
  r.add(make_request(2, 4, 10), 0);
  spec_step(r, 0, 0);
  const StepPlan p = spec_step(r, kNsPerMs, 0);
  REQUIRE(p.seqs.size() == 2);
  CHECK(p.preempted.empty());
  CHECK(p.seqs[0].num_lookahead == 1);
  CHECK(p.seqs[1].num_lookahead == 0);
  CHECK(p.seqs[1].num_new == 1);
  CHECK(kv_violation(r).empty());
}

TEST_CASE("a step with lookahead must report accepted counts in range", "[speculative]") {
  Replica r(spec_config(2, 64, 4), 0);
  r.add(make_request(1, 5, 10), 0);
  spec_step(r, 0, 0);
  SECTION("missing") {
    const StepPlan p = r.plan(kNsPerMs);
    REQUIRE(p.seqs[0].num_lookahead == 2);
    CHECK_THROWS_AS(r.complete(p, StepResult{}, 2 * kNsPerMs), Error);
  }
  SECTION("more than proposed") {
    const StepPlan p = r.plan(kNsPerMs);
    StepResult res;
    res.accepted = {3};
    CHECK_THROWS_AS(r.complete(p, res, 2 * kNsPerMs), Error);
  }
}

TEST_CASE("speculation off plans exactly as before", "[speculative]") {
  for (std::int32_t k : {0, 3}) {
    Replica r(spec_config(k, 64, 4), 0);
    r.add(make_request(1, 5, 8), 0);
    spec_step(r, 0, 0);
    const StepPlan p = spec_step(r, kNsPerMs, 0);
    CHECK(p.seqs[0].num_new == (k == 0 ? 1 : 4));
    CHECK(p.num_lookahead_tokens() == (k == 0 ? 0 : 3));
  }
}

}  // namespace twin::test
