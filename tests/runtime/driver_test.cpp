// The wall-clock driver: a small trace with shared prefixes through every
// scheduler preset finishes every request with no block leaks.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "engine/core/replica.hpp"
#include "engine/runtime/executor.hpp"
#include "engine/runtime/prompt_tokens.hpp"
#include "engine/runtime/wall_clock_driver.hpp"
#include "tests/runtime/test_support.hpp"

namespace twin::test {
namespace {

// 14 requests, arrivals 1 ms apart; even ones share a 2-id hash prefix.
std::vector<Request> small_trace() {
  std::vector<Request> out;
  for (RequestId id = 0; id < 14; ++id) {
    Request r;
    r.id = id;
    r.arrival = id * kNsPerMs;
    r.prompt_len = 9 + static_cast<std::int32_t>((id * 7) % 23);
    r.output_len = 1 + static_cast<std::int32_t>(id % 5);
    if (id % 2 == 0) {
      r.prompt_len += 16;
      r.hash_block_size = 8;
      r.hash_ids = {100, 101, static_cast<std::uint64_t>(200 + id), static_cast<std::uint64_t>(300 + id),
                    static_cast<std::uint64_t>(400 + id), static_cast<std::uint64_t>(500 + id)};
    }
    out.push_back(r);
  }
  return out;
}

struct Outcome {
  std::vector<RequestRecord> requests;
  std::int64_t steps = 0;
  DriveStats stats;
};

class OutcomeSink final : public RecordSink {
 public:
  explicit OutcomeSink(Outcome& o) : o_(o) {}
  void on_request(const RequestRecord& r) override { o_.requests.push_back(r); }
  void on_step(const StepRecord& s) override {
    ++o_.steps;
    CHECK(s.duration > 0);
  }

 private:
  Outcome& o_;
};

Outcome drive(ModelRunner& runner, ReplicaConfig rc, const std::vector<Request>& trace, bool asap) {
  Replica replica(rc, 0);
  Executor executor(runner);
  Outcome o;
  DriveOptions options;
  options.asap = asap;
  options.time_scale = 4.0;
  VectorSource source(trace);
  OutcomeSink sink(o);
  o.stats = drive_wall_clock(replica, executor, source, sink, options);
  CHECK(replica.kv_cache().num_used_blocks() == 0);
  CHECK(replica.kv_cache().check_invariants({}).empty());
  CHECK(executor.num_tracked() == 0);
  CHECK_FALSE(replica.has_work());
  return o;
}

}  // namespace

TEST_CASE("a small trace finishes under every scheduler preset with no block leaks") {
  const ModelConfig config = tiny_config();
  const auto trace = small_trace();
  for (const std::string& preset : replica_preset_names()) {
    INFO("preset " << preset);
    ReplicaConfig rc = replica_preset(preset);
    rc.kv.num_blocks = 48;
    rc.kv.block_size = preset == "lightllm" ? 1 : 4;  // token-level KV; 48 slots is tight: preemption
    set_replica_option(rc, "max_model_len", "128");
    if (rc.scheduler.max_num_batched_tokens > 0 && rc.scheduler.max_num_batched_tokens < 128) {
      set_replica_option(rc, "max_num_batched_tokens", "128");
    }
    validate(rc);
    auto block_runner = make_runner(config, "", rc.kv.num_blocks, rc.kv.block_size, "auto", 32);
    const Outcome o = drive(*block_runner, rc, trace, preset == "static");
    REQUIRE(o.requests.size() == trace.size());
    for (const RequestRecord& r : o.requests) {
      CHECK(r.outcome == twin::Outcome::finished);
      CHECK(r.output_tokens == trace[static_cast<std::size_t>(r.id)].output_len);
    }
    CHECK(o.stats.unserved == 0);
    CHECK(o.steps > 0);
  }
}

TEST_CASE("swap preemption copies KV out and back and still finishes") {
  const ModelConfig config = tiny_config();
  ReplicaConfig rc = replica_preset("vllm");
  rc.kv.num_blocks = 14;
  rc.kv.block_size = 4;
  rc.kv.num_host_blocks = 64;
  set_replica_option(rc, "preemption", "swap");
  set_replica_option(rc, "max_model_len", "48");
  auto runner = make_runner(config, "", 14, 4, "auto", 64);
  std::vector<Request> trace;
  for (RequestId id = 0; id < 6; ++id) {
    Request r;
    r.id = id;
    r.prompt_len = 10;
    r.output_len = 12;
    trace.push_back(r);
  }
  const Outcome o = drive(*runner, rc, trace, true);
  REQUIRE(o.requests.size() == trace.size());
  for (const auto& r : o.requests) CHECK(r.outcome == twin::Outcome::finished);
}

TEST_CASE("swapped requests produce the tokens of an unpressured run") {
  // Same requests with a roomy cache and with a cache that forces swaps: greedy
  // tokens must agree, or the swapped KV came back wrong.
  const ModelConfig config = tiny_config();
  auto tokens_of = [&](std::int32_t blocks, const std::string& mode) {
    ReplicaConfig rc = replica_preset("vllm");
    rc.kv.num_blocks = blocks;
    rc.kv.block_size = 4;
    rc.kv.num_host_blocks = 64;
    set_replica_option(rc, "preemption", mode);
    set_replica_option(rc, "max_model_len", "48");
    auto runner = make_runner(config, "", blocks, 4, "auto", 64);
    Replica replica(rc, 0);
    Executor executor(*runner);
    std::map<RequestId, std::vector<TokenId>> out;
    std::int64_t preemptions = 0;
    for (RequestId id = 0; id < 5; ++id) {
      Request r;
      r.id = id;
      r.prompt_len = 9 + static_cast<std::int32_t>(id);
      r.output_len = 14;
      materialize_prompt_tokens(r, 256, 1);
      replica.add(r, 0);
    }
    Time now = 0;
    while (replica.has_work()) {
      const StepPlan plan = replica.plan(now);
      REQUIRE(!plan.empty());
      replica.complete(plan, executor.execute(plan, replica), ++now);
      for (const auto& rec : replica.take_finished()) {
        out[rec.id] = *executor.output_tokens(rec.id);
        preemptions += rec.preemptions;
        executor.forget(rec.id);
      }
    }
    return std::make_pair(out, preemptions);
  };
  const auto roomy = tokens_of(64, "swap");
  const auto swapped = tokens_of(12, "swap");
  const auto recomputed = tokens_of(12, "recompute");
  CHECK(roomy.second == 0);
  CHECK(swapped.second > 0);
  CHECK(recomputed.second > 0);
  CHECK(swapped.first == roomy.first);
  CHECK(recomputed.first == roomy.first);
}

TEST_CASE("requests longer than the model context are rejected and counted, not run") {
  const ModelConfig config = tiny_config();
  ReplicaConfig rc = replica_preset("vllm");
  rc.kv.num_blocks = 64;
  rc.kv.block_size = 4;
  set_replica_option(rc, "max_model_len", "64");
  auto runner = make_runner(config, "", 64, 4);
  std::vector<Request> trace(3);
  for (std::size_t i = 0; i < trace.size(); ++i) {
    trace[i].id = static_cast<RequestId>(i);
    trace[i].prompt_len = i == 1 ? 100 : 12;
    trace[i].output_len = 3;
  }
  const Outcome o = drive(*runner, rc, trace, true);
  REQUIRE(o.requests.size() == 3);
  int rejected = 0;
  for (const auto& r : o.requests) rejected += r.outcome == twin::Outcome::rejected;
  CHECK(rejected == 1);
}

}  // namespace twin::test
