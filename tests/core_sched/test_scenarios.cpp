// Scenario tests pinning each preset's known behaviour.
#include <catch2/catch.hpp>

#include <algorithm>

#include "base/error.hpp"
#include "tests/core_sched/sched_test_util.hpp"

namespace twin::test {

TEST_CASE("vllm: running requests are scheduled before waiting ones - in one mixed step", "[scenario]") {
  Replica r(config_for("vllm", 100), 0);
  r.add(make_request(1, 100, 10), 0);
  auto p1 = step(r, 0);
  REQUIRE(p1.seqs.size() == 1);
  CHECK(p1.seqs[0].num_new == 100);
  CHECK(p1.seqs[0].samples);
  r.add(make_request(2, 100, 10), 0);
  auto p2 = step(r, kNsPerMs);
  REQUIRE(p2.seqs.size() == 2);
  CHECK(p2.seqs[0].id == 1);  // the decode comes first
  CHECK_FALSE(p2.seqs[0].is_prefill);
  CHECK(p2.seqs[0].num_new == 1);
  CHECK(p2.seqs[1].id == 2);
  CHECK(p2.seqs[1].is_prefill);
}

TEST_CASE("sarathi: chunked prefill splits a long prompt within the token budget", "[scenario]") {
  Replica r(config_for("sarathi", 1000), 0);
  r.add(make_request(1, 40, 50), 0);
  step(r, 0);  // request 1 now decodes
  r.add(make_request(2, 1200, 5), 0);
  std::vector<std::int32_t> chunks;
  for (int i = 0; i < 3; ++i) {
    auto p = step(r, (i + 1) * kNsPerMs);
    CHECK(p.num_batched_tokens() <= 512);
    REQUIRE(find_seq(p, 1) != nullptr);  // decode never stalls
    const auto* q = find_seq(p, 2);
    REQUIRE(q != nullptr);
    chunks.push_back(q->num_new);
    CHECK(q->samples == (i == 2));
  }
  CHECK(chunks == std::vector<std::int32_t>{511, 511, 178});
}

TEST_CASE("long_prefill_token_threshold caps one request's chunk", "[scenario]") {
  auto cfg = config_for("vllm", 1000);
  set_replica_option(cfg, "long_prefill_token_threshold", "100");
  Replica r(cfg, 0);
  r.add(make_request(1, 250, 2), 0);
  r.add(make_request(2, 50, 2), 0);
  auto p = step(r, 0);
  REQUIRE(p.seqs.size() == 2);
  CHECK(p.seqs[0].num_new == 100);
  CHECK(p.seqs[1].num_new == 50);
}

TEST_CASE("orca: a step with prefills carries no decodes", "[scenario]") {
  Replica r(config_for("orca", 1000), 0);
  r.add(make_request(1, 50, 10), 0);
  step(r, 0);
  r.add(make_request(2, 3000, 10), 0);
  auto p = step(r, kNsPerMs);
  REQUIRE(p.seqs.size() == 1);  // whole prompt, no chunking, decode of 1 stalls
  CHECK(p.seqs[0].id == 2);
  CHECK(p.seqs[0].num_new == 3000);
  auto p3 = step(r, 2 * kNsPerMs);
  REQUIRE(p3.seqs.size() == 2);
  for (const auto& q : p3.seqs) CHECK_FALSE(q.is_prefill);
}

TEST_CASE("static: a batch runs to completion with no joins", "[scenario]") {
  auto cfg = config_for("static", 1000);
  set_replica_option(cfg, "batch_size", "2");
  Replica r(cfg, 0);
  r.add(make_request(1, 10, 3), 0);
  r.add(make_request(2, 10, 6), 0);
  r.add(make_request(3, 10, 2), 0);
  Time t = 0;
  auto p = step(r, t);
  CHECK(p.seqs.size() == 2);
  r.add(make_request(4, 10, 2), 0);
  // Request 1 finishes after 3 tokens, but 3 and 4 wait for request 2 too.
  for (int i = 0; i < 5; ++i) {
    p = step(r, t += kNsPerMs);
    CHECK(find_seq(p, 3) == nullptr);
    CHECK(find_seq(p, 4) == nullptr);
  }
  p = step(r, t += kNsPerMs);
  CHECK(find_seq(p, 3) != nullptr);
  CHECK(find_seq(p, 4) != nullptr);
}

TEST_CASE("dynamic: waits for batch_size requests or batch_timeout", "[scenario]") {
  auto cfg = config_for("dynamic", 1000);
  set_replica_option(cfg, "batch_size", "3");
  set_replica_option(cfg, "batch_timeout_ms", "10");
  Replica r(cfg, 0);
  r.add(make_request(1, 10, 2), 0);
  r.add(make_request(2, 10, 2), 2 * kNsPerMs);
  CHECK(r.plan(5 * kNsPerMs).empty());
  REQUIRE(r.next_wakeup().has_value());
  CHECK(*r.next_wakeup() == 10 * kNsPerMs);  // from the oldest's queueing
  auto p = step(r, 10 * kNsPerMs);
  CHECK(p.seqs.size() == 2);
  while (r.has_work()) step(r, 20 * kNsPerMs);
  r.add(make_request(3, 10, 2), 30 * kNsPerMs);
  r.add(make_request(4, 10, 2), 30 * kNsPerMs);
  r.add(make_request(5, 10, 2), 30 * kNsPerMs);
  CHECK(step(r, 30 * kNsPerMs).seqs.size() == 3);  // full batch: no wait
}

TEST_CASE("lightllm: token-level KV fits more requests than 16-token blocks", "[scenario]") {
  auto run = [](std::int32_t block_size, std::int32_t num_blocks) {
    auto cfg = config_for("lightllm", num_blocks);
    cfg.kv.block_size = block_size;
    Replica r(cfg, 0);
    for (int i = 0; i < 40; ++i) r.add(make_request(i, 17, 5), 0);
    return r.plan(0).seqs.size();
  };
  CHECK(run(16, 20) == 10);  // 17 tokens take 2 blocks = 32 token slots
  CHECK(run(1, 320) == 18);  // same memory, 17 slots each
}

TEST_CASE("recompute preemption takes the newest - admits nothing that step - recomputes later", "[scenario]") {
  auto cfg = config_for("vllm", 4);
  cfg.kv.enable_prefix_caching = false;
  Replica r(cfg, 0);
  r.add(make_request(1, 16, 40), 0);
  r.add(make_request(2, 16, 40), 0);
  Time t = 0;
  StepPlan p;
  for (int i = 0; i < 40 && p.preempted.empty(); ++i) p = step(r, t += kNsPerMs);
  REQUIRE(p.preempted == std::vector<RequestId>{2});
  REQUIRE(p.seqs.size() == 1);
  CHECK(p.seqs[0].id == 1);
  CHECK(r.seq(2)->num_computed == 0);
  // Request 1 finishes, then 2 is recomputed: prompt plus what it generated.
  bool recomputed = false;
  while (r.has_work()) {
    p = step(r, t += kNsPerMs);
    if (const auto* q = find_seq(p, 2); q && q->num_computed == 0) {
      CHECK(q->num_new == 16 + 17);  // preempted when its 33rd token needed a third block
      CHECK(q->samples);
      recomputed = true;
    }
  }
  CHECK(recomputed);
  auto recs = r.take_finished();
  REQUIRE(recs.size() == 2);
  for (const auto& rec : recs) {
    CHECK(rec.outcome == Outcome::finished);
    if (rec.id == 2) CHECK(rec.preemptions == 1);
    if (rec.id == 2) CHECK(rec.output_tokens == 40);
  }
  CHECK(r.kv_cache().num_free_blocks() == 4);
}

TEST_CASE("swap preemption round trip lists the copies and keeps progress", "[scenario]") {
  auto cfg = config_for("vllm", 4);
  cfg.kv.enable_prefix_caching = false;
  cfg.kv.num_host_blocks = 8;
  cfg.scheduler.preemption = PreemptionMode::swap;
  Replica r(cfg, 0);
  r.add(make_request(1, 16, 20), 0);
  r.add(make_request(2, 16, 40), 0);
  Time t = 0;
  StepPlan p;
  for (int i = 0; i < 40 && p.preempted.empty(); ++i) p = step(r, t += kNsPerMs);
  REQUIRE(p.preempted == std::vector<RequestId>{2});
  CHECK(p.swap_out.size() == 2);
  const auto kept = r.seq(2)->num_computed;
  CHECK(kept == 32);
  CHECK(r.kv_cache().num_free_host_blocks() == 6);
  bool swapped_in = false;
  while (r.has_work()) {
    p = step(r, t += kNsPerMs);
    if (!p.swap_in.empty()) {
      CHECK(p.swap_in.size() == 2);
      const auto* q = find_seq(p, 2);
      REQUIRE(q != nullptr);
      CHECK(q->num_computed == kept);  // resumes where it was
      CHECK(q->num_new == 1);
      swapped_in = true;
    }
  }
  CHECK(swapped_in);
  CHECK(r.kv_cache().num_free_host_blocks() == 8);
  CHECK(r.kv_cache().num_free_blocks() == 4);
}

TEST_CASE("a cancelled request is aborted at the next step boundary and its blocks freed", "[scenario]") {
  Replica r(config_for("vllm", 100), 0);
  Request a = make_request(1, 100, 1000);
  a.cancel_time = 5 * kNsPerMs;
  r.add(a, 0);
  r.add(make_request(2, 10, 100), 0);
  CHECK(r.next_wakeup() == 5 * kNsPerMs);
  Time t = 0;
  while (t < 5 * kNsPerMs) step(r, t += kNsPerMs);
  CHECK(r.seq(1) == std::nullopt);
  auto recs = r.take_finished();
  REQUIRE(recs.size() == 1);
  CHECK(recs[0].id == 1);
  CHECK(recs[0].outcome == Outcome::aborted);
  CHECK(recs[0].finish == 5 * kNsPerMs);
  CHECK(r.kv_cache().num_used_blocks() == 1);  // request 2's one block
  r.abort(2, t);
  CHECK(r.kv_cache().num_used_blocks() == 0);
  CHECK(r.take_finished().size() == 1);
  r.abort(2, t);  // twice is harmless
  CHECK(r.take_finished().empty());
}

TEST_CASE("a request aborted inside an outstanding plan keeps its blocks until the plan completes", "[scenario]") {
  Replica r(config_for("vllm", 100), 0);
  r.add(make_request(1, 40, 10), 0);
  auto p = r.plan(0);
  r.abort(1, 0);
  CHECK(r.take_finished().size() == 1);
  CHECK(r.kv_cache().num_used_blocks() == 3);
  r.complete(p, {}, kNsPerMs);
  CHECK(r.kv_cache().num_used_blocks() == 0);
  CHECK(r.take_finished().empty());
}

TEST_CASE("requests that can never fit are rejected at once with a reason", "[scenario]") {
  auto cfg = config_for("vllm", 10);
  set_replica_option(cfg, "max_model_len", "1000");
  Replica r(cfg, 3);
  r.add(make_request(1, 900, 101), 0);   // beyond max_model_len
  r.add(make_request(2, 200, 10), 0);    // 13 blocks > 10
  r.add(make_request(3, 150, 10), 0);    // fits: 159 tokens = 10 blocks
  r.add(make_request(4, 0, 10), 0);
  auto recs = r.take_finished();
  REQUIRE(recs.size() == 3);
  CHECK(recs[0].id == 1);
  CHECK(recs[0].outcome == Outcome::rejected);
  CHECK(recs[0].replica == 3);
  CHECK(recs[0].reason.find("max_model_len") != std::string::npos);
  CHECK(recs[1].id == 2);
  CHECK(recs[1].reason.find("blocks") != std::string::npos);
  CHECK(recs[2].id == 4);
  CHECK(r.num_waiting() == 1);
}

TEST_CASE("prefix cache hits count as cached prompt tokens at first admission", "[scenario]") {
  Replica r(config_for("vllm", 100), 0);
  r.add(make_token_request(1, 64, 2, 7, 64), 0);
  while (r.has_work()) step(r, 0);
  Request b = make_token_request(2, 64, 2, 7, 64);
  CHECK(r.cached_prefix_tokens(b) == 48);  // never the block holding the last token
  r.add(b, 0);
  auto p = step(r, 0);
  REQUIRE(p.seqs.size() == 1);
  CHECK(p.seqs[0].num_computed == 48);
  CHECK(p.seqs[0].num_new == 16);
  while (r.has_work()) step(r, 0);
  auto recs = r.take_finished();
  REQUIRE(recs.size() == 2);
  CHECK(recs[0].cached_prompt_tokens == 0);
  CHECK(recs[1].cached_prompt_tokens == 48);
}

TEST_CASE("token times: first token and inter-token gaps", "[scenario]") {
  Replica r(config_for("vllm", 100), 0);
  r.add(make_request(1, 10, 3, 0), 0);
  auto p = r.plan(0);
  r.complete(p, {}, 7);
  p = r.plan(7);
  r.complete(p, {}, 10);
  p = r.plan(10);
  r.complete(p, {}, 20);
  auto recs = r.take_finished();
  REQUIRE(recs.size() == 1);
  CHECK(recs[0].first_token == 7);
  CHECK(recs[0].finish == 20);
  CHECK(recs[0].itl == std::vector<Time>{3, 10});
}

TEST_CASE("with several plans in flight a request is in at most one", "[scenario]") {
  auto cfg = config_for("vllm", 100);
  cfg.max_plans_in_flight = 2;
  Replica r(cfg, 0);
  r.add(make_request(1, 10, 5), 0);
  auto p1 = r.plan(0);
  r.add(make_request(2, 10, 5), 0);
  auto p2 = r.plan(0);
  REQUIRE(p1.seqs.size() == 1);
  REQUIRE(p2.seqs.size() == 1);
  CHECK(p2.seqs[0].id == 2);
  CHECK_FALSE(r.can_plan());
  CHECK(r.plan(0).empty());
  r.complete(p1, {}, 1);
  auto p3 = r.plan(1);
  REQUIRE(p3.seqs.size() == 1);
  CHECK(p3.seqs[0].id == 1);
  CHECK_THROWS_AS(r.complete(p1, {}, 2), Error);  // already completed
}

TEST_CASE("EOS ends a request early when stop_at_eos is on", "[scenario]") {
  auto cfg = config_for("vllm", 100);
  cfg.scheduler.stop_at_eos = true;
  Replica r(cfg, 0);
  r.add(make_request(1, 10, 50), 0);
  auto p = r.plan(0);
  r.complete(p, {}, 1);
  p = r.plan(1);
  StepResult res;
  res.stopped = {1};
  r.complete(p, res, 2);
  auto recs = r.take_finished();
  REQUIRE(recs.size() == 1);
  CHECK(recs[0].output_tokens == 2);
}

TEST_CASE("priority order admits the most urgent first", "[scenario]") {
  auto cfg = config_for("vllm", 100);
  set_replica_option(cfg, "order", "priority");
  set_replica_option(cfg, "max_num_seqs", "1");
  Replica r(cfg, 0);
  Request a = make_request(1, 10, 1);
  a.priority = 5;
  Request b = make_request(2, 10, 1);
  b.priority = 1;
  r.add(a, 0);
  r.add(b, 0);
  auto p = step(r, 0);
  REQUIRE(p.seqs.size() == 1);
  CHECK(p.seqs[0].id == 2);
}

TEST_CASE("shortest_prompt and length_buckets orders", "[scenario]") {
  SECTION("shortest first") {
    auto cfg = config_for("vllm", 100);
    set_replica_option(cfg, "order", "shortest_prompt");
    set_replica_option(cfg, "max_num_seqs", "1");
    Replica r(cfg, 0);
    r.add(make_request(1, 300, 1), 0);
    r.add(make_request(2, 30, 1), 0);
    CHECK(step(r, 0).seqs[0].id == 2);
  }
  SECTION("bucket by bucket") {
    auto cfg = config_for("vllm", 100);
    set_replica_option(cfg, "order", "length_buckets");
    set_replica_option(cfg, "length_bucket_bounds", "100");
    set_replica_option(cfg, "max_num_seqs", "1");
    Replica r(cfg, 0);
    r.add(make_request(1, 300, 1), 0);  // bucket 1
    r.add(make_request(2, 30, 1), 0);   // bucket 0
    r.add(make_request(3, 400, 1), 0);  // bucket 1
    r.add(make_request(4, 40, 1), 0);   // bucket 0
    std::vector<RequestId> order;
    while (r.has_work()) {
      auto p = step(r, 0);
      for (const auto& q : p.seqs) order.push_back(q.id);
    }
    CHECK(order == std::vector<RequestId>{2, 4, 1, 3});
  }
}

TEST_CASE("longest_prefix admits the longest cached prefix first", "[scenario]") {
  auto cfg = config_for("vllm", 100);
  set_replica_option(cfg, "order", "longest_prefix");
  set_replica_option(cfg, "max_num_seqs", "1");
  Replica r(cfg, 0);
  r.add(make_token_request(1, 64, 1, 3, 64), 0);
  while (r.has_work()) step(r, 0);
  r.add(make_token_request(2, 64, 1, 9, 0), 0);   // no shared prefix
  r.add(make_token_request(3, 64, 1, 3, 64), 0);  // shares 48 cached tokens
  auto p = step(r, 0);
  REQUIRE(p.seqs.size() == 1);
  CHECK(p.seqs[0].id == 3);
}

TEST_CASE("step records describe each step", "[scenario]") {
  Replica r(config_for("vllm", 100), 0);
  r.set_record_steps(true);
  r.add(make_request(1, 20, 2), 0);
  r.add(make_request(2, 30, 1), 0);
  step(r, 0, 5);
  step(r, 10, 5);
  auto steps = r.take_steps();
  REQUIRE(steps.size() == 2);
  CHECK(steps[0].batch_size == 2);
  CHECK(steps[0].num_prefill_seqs == 2);
  CHECK(steps[0].new_tokens == 50);
  CHECK(steps[0].duration == 5);
  CHECK(steps[0].waiting == 2);
  CHECK(steps[1].start == 10);
  CHECK(steps[1].num_decode_seqs == 1);
  CHECK(steps[1].context_tokens == 20);
  CHECK(steps[1].kv_blocks_used == 0);
  CHECK(r.take_steps().empty());
}

}  // namespace twin::test
