// Prefill/decode disaggregation in the serving loop, over a clock made for
// the test: every step lasts a fixed time, a KV transfer a fixed time plus a
// time per token. Every request must end exactly once, on the replica the
// pools say, with the KV moved only once the decode side had blocks for it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "engine/core/record_stream.hpp"
#include "engine/core/serving_loop.hpp"
#include "tests/core_sched/sched_test_util.hpp"

namespace twin::test {
namespace {

class TransferTestClock {
 public:
  TransferTestClock(Time step, Time transfer_fixed, Time transfer_per_token)
      : step_(step), fixed_(transfer_fixed), per_token_(transfer_per_token) {}
  static constexpr bool stop_requested() { return false; }
  static constexpr bool wait_until(Time) { return true; }
  static constexpr Time read(Time now) { return now; }
  static constexpr void admit(Request&, const Replica&) {}
  static constexpr void on_ended(const RequestRecord&) {}
  StepTiming run_step(std::int32_t, const StepPlan&, const Replica&, Time now, StepResult&) {
    return StepTiming{now + step_, now + step_};
  }
  TransferTiming kv_transfer(const InboundTransfer& t) {
    transfers.push_back(t);
    return TransferTiming{t.start + fixed_ + per_token_ * t.tokens, 100LL * t.tokens};
  }
  std::vector<InboundTransfer> transfers;

 private:
  Time step_, fixed_, per_token_;
};
static_assert(ServingClock<TransferTestClock>);
static_assert(TransferClock<TransferTestClock>);

// The serving loop's own clock contract without transfers: refuses pools.
class NoTransferClock {
 public:
  static constexpr bool stop_requested() { return false; }
  static constexpr bool wait_until(Time) { return true; }
  static constexpr Time read(Time now) { return now; }
  static constexpr void admit(Request&, const Replica&) {}
  static constexpr void on_ended(const RequestRecord&) {}
  StepTiming run_step(std::int32_t, const StepPlan&, const Replica&, Time now, StepResult&) {
    return StepTiming{now + kNsPerMs, now + kNsPerMs};
  }
};
static_assert(!TransferClock<NoTransferClock>);

class Collect final : public RecordSink {
 public:
  void on_request(const RequestRecord& r) override { requests.push_back(r); }
  std::vector<RequestRecord> requests;
  const RequestRecord& of(RequestId id) const {
    for (const RequestRecord& r : requests) {
      if (r.id == id) return r;
    }
    FAIL("no record for request " << id);
    return requests.front();
  }
};

ReplicaConfig role_config(ReplicaRole role, std::int32_t blocks) {
  ReplicaConfig c = config_for("vllm", blocks);
  c.role = role;
  return c;
}

std::vector<Replica> pools(std::int32_t prefill, std::int32_t decode, std::int32_t prefill_blocks,
                           std::int32_t decode_blocks) {
  std::vector<Replica> out;
  for (std::int32_t i = 0; i < prefill; ++i) out.emplace_back(role_config(ReplicaRole::prefill, prefill_blocks), i);
  for (std::int32_t i = 0; i < decode; ++i) {
    out.emplace_back(role_config(ReplicaRole::decode, decode_blocks), prefill + i);
  }
  return out;
}

// Every id once, and every block of every replica free again.
void check_all_ended_once(const Collect& sink, std::size_t n, std::span<Replica> replicas) {
  std::map<RequestId, int> seen;
  for (const RequestRecord& r : sink.requests) ++seen[r.id];
  CHECK(seen.size() == n);
  for (const auto& [id, count] : seen) {
    INFO("request " << id);
    CHECK(count == 1);
  }
  for (const Replica& r : replicas) {
    INFO("replica " << r.index());
    CHECK(r.num_outstanding() == 0);
    CHECK(r.kv_cache().num_used_blocks() == 0);
    CHECK(kv_violation(r).empty());
  }
}

}  // namespace

TEST_CASE("a disaggregated request prefills on a prefill replica and decodes on a decode replica") {
  std::vector<Replica> replicas = pools(1, 1, 64, 64);
  TransferTestClock clock(kNsPerMs, 100'000, 1'000);
  ServingOptions options;
  ServingLoop<TransferTestClock> loop(replicas, clock, options);
  VectorSource source({make_request(0, 40, 4, 0)});
  Collect sink;
  const ServingStats stats = loop.run(source, sink);
  REQUIRE(sink.requests.size() == 1);
  const RequestRecord& r = sink.requests.front();
  CHECK(r.outcome == Outcome::finished);
  CHECK(r.replica == 1);
  CHECK(r.prefill_replica == 0);
  CHECK(r.output_tokens == 4);
  // The prefill step (1 ms) samples the first token on the prefill replica;
  // the decode side has room at once; 40 tokens move in 100 us + 40 us.
  CHECK(r.first_token == kNsPerMs);
  CHECK(r.kv_reserved == kNsPerMs);
  CHECK(r.kv_arrived == kNsPerMs + 140'000);
  CHECK(r.kv_transfer_bytes == 4000);
  // Three decodes of 1 ms each on the decode replica, the first once the KV is there.
  REQUIRE(r.itl.size() == 3);
  CHECK(r.itl[0] == 140'000 + kNsPerMs);
  CHECK(r.itl[1] == kNsPerMs);
  CHECK(r.finish == r.kv_arrived + 3 * kNsPerMs);
  CHECK(stats.handoffs == 1);
  CHECK(stats.transfers == 1);
  REQUIRE(clock.transfers.size() == 1);
  CHECK(clock.transfers[0].from_replica == 0);
  CHECK(clock.transfers[0].to_replica == 1);
  CHECK(clock.transfers[0].tokens == 40);
  CHECK(clock.transfers[0].prefill_start == 0);
  CHECK(clock.transfers[0].prefill_end == kNsPerMs);
  check_all_ended_once(sink, 1, replicas);
}

TEST_CASE("a one-token request ends on its prefill replica with nothing moved") {
  std::vector<Replica> replicas = pools(1, 1, 64, 64);
  TransferTestClock clock(kNsPerMs, 100'000, 1'000);
  ServingLoop<TransferTestClock> loop(replicas, clock, ServingOptions{});
  VectorSource source({make_request(0, 40, 1, 0)});
  Collect sink;
  const ServingStats stats = loop.run(source, sink);
  REQUIRE(sink.requests.size() == 1);
  CHECK(sink.requests[0].replica == 0);
  CHECK(sink.requests[0].prefill_replica == 0);
  CHECK(sink.requests[0].kv_arrived == kNoTime);
  CHECK(stats.handoffs == 0);
  CHECK(clock.transfers.empty());
  check_all_ended_once(sink, 1, replicas);
}

TEST_CASE("a transfer waits for the decode replica's blocks and nothing is lost") {
  // The decode replica holds one request at a time (3 blocks of 16 for
  // 40 + 8 tokens); six requests prefill at once on two prefill replicas.
  std::vector<Replica> replicas = pools(2, 1, 64, 4);
  TransferTestClock clock(kNsPerMs, 100'000, 1'000);
  ServingLoop<TransferTestClock> loop(replicas, clock, ServingOptions{});
  std::vector<Request> requests;
  for (RequestId id = 0; id < 6; ++id) requests.push_back(make_request(id, 40, 8, 0));
  VectorSource source(requests);
  Collect sink;
  const ServingStats stats = loop.run(source, sink);
  check_all_ended_once(sink, 6, replicas);
  CHECK(stats.handoffs == 6);
  CHECK(stats.transfers == 6);
  std::int32_t waited = 0;
  for (const RequestRecord& r : sink.requests) {
    CHECK(r.outcome == Outcome::finished);
    CHECK(r.output_tokens == 8);
    CHECK(r.replica == 2);
    CHECK(r.kv_reserved >= r.first_token);
    if (r.kv_reserved > r.first_token) ++waited;
  }
  CHECK(waited >= 4);
  // One at a time: each transfer starts only after the previous request ended.
  std::vector<RequestRecord> by_start = sink.requests;
  std::sort(by_start.begin(), by_start.end(), [](const auto& a, const auto& b) { return a.kv_reserved < b.kv_reserved; });
  for (std::size_t i = 1; i < by_start.size(); ++i) CHECK(by_start[i].kv_reserved >= by_start[i - 1].finish);
}

TEST_CASE("conditional disaggregation prefills short prompts on the decode replica") {
  std::vector<Replica> replicas = pools(1, 1, 64, 64);
  TransferTestClock clock(kNsPerMs, 100'000, 1'000);
  ServingOptions options;
  options.disagg.mode = DisaggMode::conditional;
  options.disagg.conditional_threshold = 32;
  ServingLoop<TransferTestClock> loop(replicas, clock, options);
  VectorSource source({make_request(0, 32, 3, 0), make_request(1, 33, 3, 0)});
  Collect sink;
  const ServingStats stats = loop.run(source, sink);
  check_all_ended_once(sink, 2, replicas);
  CHECK(stats.handoffs == 1);
  CHECK(sink.of(0).replica == 1);
  CHECK(sink.of(0).prefill_replica == 1);  // prefilled where it decoded
  CHECK(sink.of(0).kv_arrived == kNoTime);
  CHECK(sink.of(1).replica == 1);
  CHECK(sink.of(1).prefill_replica == 0);
  CHECK(sink.of(1).kv_arrived != kNoTime);
}

TEST_CASE("conditional disaggregation counts the decode replica's prefix hits") {
  // Two requests share 48 prompt tokens; the second, arriving after the
  // first is done, finds them cached on the decode replica (published when
  // its KV arrived) and its 16 uncached tokens stay under the threshold.
  std::vector<Replica> replicas = pools(1, 1, 64, 64);
  TransferTestClock clock(kNsPerMs, 100'000, 1'000);
  ServingOptions options;
  options.disagg.mode = DisaggMode::conditional;
  options.disagg.conditional_threshold = 20;
  ServingLoop<TransferTestClock> loop(replicas, clock, options);
  Request a = make_token_request(0, 64, 2, 7, 48);
  Request b = make_token_request(1, 64, 2, 7, 48);
  b.arrival = 100 * kNsPerMs;
  VectorSource source({a, b});
  Collect sink;
  loop.run(source, sink);
  check_all_ended_once(sink, 2, replicas);
  CHECK(sink.of(0).prefill_replica == 0);
  CHECK(sink.of(1).prefill_replica == 1);
  CHECK(sink.of(1).cached_prompt_tokens == 48);
}

TEST_CASE("a transfer moves only the blocks the decode replica does not cache") {
  std::vector<Replica> replicas = pools(1, 1, 64, 64);
  TransferTestClock clock(kNsPerMs, 100'000, 1'000);
  ServingLoop<TransferTestClock> loop(replicas, clock, ServingOptions{});
  Request a = make_token_request(0, 64, 2, 7, 48);
  Request b = make_token_request(1, 64, 2, 7, 48);
  b.arrival = 100 * kNsPerMs;
  VectorSource source({a, b});
  Collect sink;
  loop.run(source, sink);
  check_all_ended_once(sink, 2, replicas);
  REQUIRE(clock.transfers.size() == 2);
  CHECK(clock.transfers[0].tokens == 64);
  CHECK(clock.transfers[1].tokens == 16);  // three shared blocks of 16 cached on the decode side
  CHECK(sink.of(1).kv_transfer_bytes == 1600);
}

TEST_CASE("disaggregation mode never serves everything on the decode pool") {
  std::vector<Replica> replicas = pools(1, 2, 64, 64);
  TransferTestClock clock(kNsPerMs, 100'000, 1'000);
  ServingOptions options;
  options.disagg.mode = DisaggMode::never;
  ServingLoop<TransferTestClock> loop(replicas, clock, options);
  VectorSource source({make_request(0, 40, 3, 0), make_request(1, 40, 3, 0)});
  Collect sink;
  const ServingStats stats = loop.run(source, sink);
  check_all_ended_once(sink, 2, replicas);
  CHECK(stats.handoffs == 0);
  CHECK(sink.of(0).replica == 1);
  CHECK(sink.of(1).replica == 2);
}

TEST_CASE("a request cancelled while it waits for decode blocks ends once and frees its prefill blocks") {
  // Request 0 occupies the decode replica for 20 ms; request 1 waits for
  // blocks there and is cancelled meanwhile.
  std::vector<Replica> replicas = pools(1, 1, 64, 4);
  TransferTestClock clock(kNsPerMs, 100'000, 1'000);
  ServingLoop<TransferTestClock> loop(replicas, clock, ServingOptions{});
  Request cancelled = make_request(1, 40, 8, 0);
  cancelled.cancel_time = 5 * kNsPerMs;
  VectorSource source({make_request(0, 40, 20, 0), cancelled});
  Collect sink;
  loop.run(source, sink);
  check_all_ended_once(sink, 2, replicas);
  CHECK(sink.of(0).outcome == Outcome::finished);
  CHECK(sink.of(1).outcome == Outcome::aborted);
  CHECK(sink.of(1).reason == "cancelled");
  CHECK(sink.of(1).replica == 1);
  CHECK(sink.of(1).kv_reserved == kNoTime);
}

TEST_CASE("a request cancelled while its KV is on the way ends once") {
  std::vector<Replica> replicas = pools(1, 1, 64, 64);
  TransferTestClock clock(kNsPerMs, 10 * kNsPerMs, 0);  // a 10 ms transfer
  ServingLoop<TransferTestClock> loop(replicas, clock, ServingOptions{});
  Request r = make_request(0, 40, 8, 0);
  r.cancel_time = 5 * kNsPerMs;
  VectorSource source({r});
  Collect sink;
  const ServingStats stats = loop.run(source, sink);
  check_all_ended_once(sink, 1, replicas);
  CHECK(sink.requests[0].outcome == Outcome::aborted);
  CHECK(stats.transfers == 1);
}

TEST_CASE("a hand-off the decode replica can never hold is rejected once") {
  std::vector<Replica> replicas;
  replicas.emplace_back(role_config(ReplicaRole::prefill, 64), 0);
  ReplicaConfig small = role_config(ReplicaRole::decode, 64);
  small.scheduler.max_model_len = 32;
  small.kv.max_model_len = 32;
  replicas.emplace_back(small, 1);
  TransferTestClock clock(kNsPerMs, 100'000, 1'000);
  ServingLoop<TransferTestClock> loop(replicas, clock, ServingOptions{});
  VectorSource source({make_request(0, 40, 8, 0)});
  Collect sink;
  loop.run(source, sink);
  check_all_ended_once(sink, 1, replicas);
  CHECK(sink.requests[0].outcome == Outcome::rejected);
  CHECK(sink.requests[0].reason.rfind("decode replica: ", 0) == 0);
  CHECK(sink.requests[0].prefill_replica == 0);
}

TEST_CASE("pools need a clock that prices transfers, and both pools") {
  std::vector<Replica> replicas = pools(1, 1, 64, 64);
  NoTransferClock clock;
  CHECK_THROWS_AS(ServingLoop<NoTransferClock>(replicas, clock, ServingOptions{}), UsageError);
  TransferTestClock transfer_clock(kNsPerMs, 0, 0);
  std::vector<Replica> prefill_only = pools(2, 0, 64, 64);
  CHECK_THROWS_AS(ServingLoop<TransferTestClock>(prefill_only, transfer_clock, ServingOptions{}), UsageError);
  std::vector<Replica> mixed = pools(1, 1, 64, 64);
  mixed.emplace_back(config_for("vllm", 64), 2);
  CHECK_THROWS_AS(ServingLoop<TransferTestClock>(mixed, transfer_clock, ServingOptions{}), UsageError);
}

TEST_CASE("random disaggregated runs end every request once and leak no block") {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    INFO("seed " << seed);
    std::uint64_t state = seed * 0x9E3779B97F4A7C15ULL;
    auto next = [&](std::int64_t n) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      return static_cast<std::int64_t>(state % static_cast<std::uint64_t>(n));
    };
    std::vector<Replica> replicas = pools(2, 2, 40 + static_cast<std::int32_t>(next(40)),
                                          12 + static_cast<std::int32_t>(next(20)));
    TransferTestClock clock(kNsPerMs, next(3) * kNsPerMs, next(20'000));
    ServingOptions options;
    options.disagg.mode = seed % 3 == 0 ? DisaggMode::conditional : DisaggMode::always;
    options.disagg.conditional_threshold = 24;
    options.disagg.decode_router = seed % 2 ? "least_outstanding" : "round_robin";
    ServingLoop<TransferTestClock> loop(replicas, clock, options);
    std::vector<Request> requests;
    Time t = 0;
    for (RequestId id = 0; id < 60; ++id) {
      t += next(3) * kNsPerMs;
      Request r = make_request(id, 1 + static_cast<std::int32_t>(next(120)), 1 + static_cast<std::int32_t>(next(40)), t);
      if (next(5) == 0) r.cancel_time = t + next(40) * kNsPerMs;
      requests.push_back(r);
    }
    VectorSource source(requests);
    Collect sink;
    const ServingStats stats = loop.run(source, sink);
    check_all_ended_once(sink, requests.size(), replicas);
    CHECK(stats.unserved == 0);
    for (const RequestRecord& r : sink.requests) {
      if (r.outcome != Outcome::finished) continue;
      CHECK(r.itl.size() == static_cast<std::size_t>(r.output_tokens - 1));
      if (r.kv_arrived != kNoTime) CHECK(r.kv_arrived >= r.kv_reserved);
    }
  }
}

}  // namespace twin::test
