// Randomized invariant tests: thousands of random arrivals, aborts, cancels
// and completions through every preset, checked at every step.
#include <catch2/catch.hpp>

#include <cstdint>
#include <deque>
#include <map>
#include <set>

#include "engine/core/scheduler_config.hpp"
#include "tests/core_sched/sched_test_util.hpp"

namespace twin::test {
namespace {

struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  std::int32_t uniform(std::int32_t lo, std::int32_t hi) {  // inclusive
    return lo + static_cast<std::int32_t>(next() % static_cast<std::uint64_t>(hi - lo + 1));
  }
  bool chance(double p) { return static_cast<double>(next() % 1'000'000) < p * 1e6; }
};

struct Tracked {
  Request req;
  std::int32_t computed = 0;   // as the plans say
  std::int32_t outputs = 0;
  bool seen = false;
  bool preempted_since_seen = false;
  std::int32_t first_hits = -1;
};

struct Options {
  std::string preset;
  std::int32_t num_blocks = 160;
  std::int32_t requests = 800;
  std::int32_t plans_in_flight = 1;
  bool swap = false;
  bool eos = false;
  std::int32_t spec = 0;  // num_speculative_tokens; accepted counts drawn at random
  std::uint64_t seed = 1;
  std::vector<std::pair<std::string, std::string>> overrides;
  std::vector<KvTierConfig> tiers;  // KV tiers below HBM
};

void run_random(const Options& o) {
  ReplicaConfig cfg = config_for(o.preset, o.num_blocks);
  set_replica_option(cfg, "max_model_len", "2048");
  cfg.max_plans_in_flight = o.plans_in_flight;
  if (o.swap) {
    cfg.scheduler.preemption = PreemptionMode::swap;
    cfg.kv.num_host_blocks = o.num_blocks / 2;
  }
  cfg.scheduler.stop_at_eos = o.eos;
  cfg.scheduler.num_speculative_tokens = o.spec;
  for (const auto& [k, v] : o.overrides) set_replica_option(cfg, k, v);
  cfg.kv.tiers = o.tiers;
  Replica rep(cfg, 0);
  rep.set_record_steps(true);
  const std::int32_t budget = effective_token_budget(cfg.scheduler);
  const std::int32_t bs = cfg.kv.block_size;
  const bool fcfs = cfg.scheduler.order == "fcfs";

  Rng rng{o.seed};
  std::map<RequestId, Tracked> tracked;
  std::map<RequestId, int> ended;
  std::vector<RequestId> first_seen_order;
  std::deque<StepPlan> outstanding;
  RequestId next_id = 0;
  Time now = 0;
  std::int64_t steps = 0;

  auto drain_records = [&] {
    for (const auto& rec : rep.take_finished()) {
      ++ended[rec.id];
      INFO("request " << rec.id);
      REQUIRE(ended[rec.id] == 1);
      auto& t = tracked.at(rec.id);
      if (rec.outcome == Outcome::aborted) {
        // Aborted inside an outstanding plan: that plan's token is never delivered.
        REQUIRE(rec.output_tokens <= t.outputs);
        REQUIRE(rec.output_tokens >= t.outputs - 1);
      } else {
        REQUIRE(rec.output_tokens == t.outputs);
      }
      if (rec.outcome == Outcome::finished) {
        if (!o.eos) REQUIRE(rec.output_tokens == t.req.output_len);
        // Everything but the last sampled token's KV was computed.
        REQUIRE(t.computed == t.req.prompt_len + rec.output_tokens - 1);
        REQUIRE(static_cast<std::int32_t>(rec.itl.size()) == rec.output_tokens - 1);
        REQUIRE(rec.cached_prompt_tokens == t.first_hits);
      }
    }
  };

  while (next_id < o.requests || rep.has_work() || !outstanding.empty()) {
    REQUIRE(++steps < 400000);
    // Arrivals.
    if (next_id < o.requests) {
      const int n = rng.uniform(0, 3);
      for (int k = 0; k < n && next_id < o.requests; ++k) {
        const std::int32_t prompt = rng.chance(0.02) ? rng.uniform(1500, 2100) : rng.uniform(1, 300);
        const std::int32_t output = rng.uniform(1, 80);
        Request r = rng.chance(0.5) ? make_token_request(next_id, prompt, output, rng.uniform(0, 3), rng.uniform(0, 200))
                                    : make_request(next_id, prompt, output);
        r.arrival = now;
        r.priority = rng.uniform(0, 3);
        if (rng.chance(0.05)) r.cancel_time = now + rng.uniform(0, 50) * kNsPerMs;
        tracked[next_id] = Tracked{r};
        rep.add(std::move(r), now);
        ++next_id;
      }
    }
    // Random client aborts.
    if (next_id > 0 && rng.chance(0.02)) rep.abort(rng.uniform(0, static_cast<std::int32_t>(next_id - 1)), now);

    while (rep.can_plan()) {
      StepPlan p = rep.plan(now);
      for (RequestId id : p.preempted) tracked.at(id).preempted_since_seen = true;
      if (p.empty()) break;
      REQUIRE(p.num_batched_tokens() <= budget);
      REQUIRE(rep.num_running() <= cfg.scheduler.max_num_seqs);
      bool any_prefill = false, any_decode = false;
      std::set<RequestId> in_plan;
      for (const auto& q : p.seqs) {
        REQUIRE(in_plan.insert(q.id).second);
        auto& t = tracked.at(q.id);
        INFO("request " << q.id << " num_computed " << q.num_computed << " tracked " << t.computed);
        REQUIRE(q.num_new >= 1);
        REQUIRE(q.num_lookahead >= 0);
        REQUIRE(q.num_lookahead <= o.spec);
        const std::int32_t known_new = q.num_new - q.num_lookahead;
        if (q.num_lookahead > 0) {
          // Lookahead only after a decode's one known token, never beyond the output.
          REQUIRE(known_new == 1);
          REQUIRE(!q.is_prefill);
          REQUIRE(q.samples);
          REQUIRE(t.outputs + 1 + q.num_lookahead <= t.req.output_len);
        }
        // A request (re)admitted this step: with its own generated blocks a
        // resumed one may have a single token left, still an admission.
        const bool admitted_now =
            !t.seen || (t.preempted_since_seen && cfg.scheduler.preemption == PreemptionMode::recompute);
        if (q.num_computed != t.computed) {
          // Only the first admission or a recompute starts from cache hits,
          // never covering the last known token (a recompute may hit its
          // own generated blocks).
          REQUIRE((t.preempted_since_seen || !t.seen));
          REQUIRE(q.num_computed % bs == 0);
          REQUIRE(q.num_computed < t.req.prompt_len + t.outputs);
        }
        if (!t.seen) {
          t.seen = true;
          t.first_hits = q.num_computed;
          first_seen_order.push_back(q.id);
        }
        t.preempted_since_seen = false;
        t.computed = q.num_computed + known_new;
        REQUIRE(t.computed <= t.req.prompt_len + t.outputs);
        REQUIRE(q.samples == (t.computed == t.req.prompt_len + t.outputs));
        if (q.samples) ++t.outputs;
        (q.is_prefill || admitted_now ? any_prefill : any_decode) = true;
      }
      if (!cfg.scheduler.decode_first) REQUIRE(!(any_prefill && any_decode));
      outstanding.push_back(std::move(p));
    }
    now += kNsPerMs;
    if (!outstanding.empty()) {
      StepResult result;
      const StepPlan& done = outstanding.front();
      if (done.num_lookahead_tokens() > 0) {
        result.accepted.assign(done.seqs.size(), 0);
        for (std::size_t j = 0; j < done.seqs.size(); ++j) {
          const auto& q = done.seqs[j];
          if (q.num_lookahead == 0) continue;
          result.accepted[j] = rng.uniform(0, q.num_lookahead);
          // The core drops the step of a request ended meanwhile (abort) or
          // cancelled within it; the others gain the accepted tokens.
          auto& t = tracked.at(q.id);
          const bool cancelled = t.req.cancel_time != kNoTime && t.req.cancel_time <= now;
          if (rep.seq(q.id) && !cancelled) {
            t.computed += result.accepted[j];
            t.outputs += result.accepted[j];
          }
        }
      }
      if (o.eos) {
        for (const auto& q : outstanding.front().seqs) {
          if (q.samples && rng.chance(0.03)) result.stopped.push_back(q.id);
        }
      }
      rep.complete(outstanding.front(), result, now);
      outstanding.pop_front();
    } else if (auto w = rep.next_wakeup()) {
      now = std::max(now, *w);
    }
    const std::string violation = kv_violation(rep);
    INFO("step " << steps);
    REQUIRE(violation.empty());
    drain_records();
  }
  drain_records();
  REQUIRE(static_cast<std::int64_t>(ended.size()) == o.requests);
  REQUIRE(rep.live_seqs().empty());
  REQUIRE(rep.kv_cache().num_free_blocks() == rep.kv_cache().num_blocks());
  REQUIRE(rep.kv_cache().num_free_host_blocks() == cfg.kv.num_host_blocks);
  if (fcfs) {
    for (std::size_t i = 1; i < first_seen_order.size(); ++i) REQUIRE(first_seen_order[i - 1] < first_seen_order[i]);
  }
  std::int64_t step_tokens = 0, proposed = 0, accepted = 0, tier_loads = 0;
  for (const auto& s : rep.take_steps()) {
    for (const std::int32_t n : s.tier_loads) tier_loads += n;
    step_tokens += s.new_tokens;
    proposed += s.proposed_tokens;
    accepted += s.accepted_tokens;
    std::int64_t listed = 0;
    for (const std::int32_t a : s.accepted) listed += a;
    REQUIRE(listed == s.accepted_tokens);
    REQUIRE(s.accepted_tokens <= s.proposed_tokens);
  }
  REQUIRE(step_tokens > 0);
  REQUIRE((o.spec > 0) == (proposed > 0));
  if (o.spec > 0) REQUIRE(accepted > 0);
  // Every block loaded from a tier was paid for by exactly one step.
  std::int64_t tier_hits = 0;
  for (std::size_t t = 0; t < rep.kv_cache().tiers().size(); ++t) tier_hits += rep.kv_cache().tiers().stats(t).hit_blocks;
  REQUIRE(tier_loads == tier_hits);
  REQUIRE(tier_hits == rep.kv_stats().tier_hit_blocks);
  if (!o.tiers.empty()) REQUIRE(tier_hits > 0);
}

}  // namespace

TEST_CASE("random workloads keep every invariant through every preset", "[random]") {
  for (const auto& preset : scheduler_preset_names()) {
    SECTION(preset) {
      for (std::uint64_t seed : {1, 2}) {
        Options o;
        o.preset = preset;
        o.seed = seed;
        if (preset == "lightllm") o.num_blocks = 160 * 16;
        run_random(o);
      }
    }
  }
}

TEST_CASE("random workloads: swap preemption - pipeline plans - EOS - other orders", "[random]") {
  Options o;
  o.preset = "vllm";
  o.requests = 600;
  o.seed = 7;
  SECTION("swap") {
    o.swap = true;
    run_random(o);
  }
  SECTION("swap prefill-first") {
    o.preset = "orca";
    o.swap = true;
    run_random(o);
  }
  SECTION("two plans in flight") {
    o.plans_in_flight = 2;
    run_random(o);
  }
  SECTION("four plans in flight, swap, oldest victim") {
    o.plans_in_flight = 4;
    o.swap = true;
    o.overrides = {{"victim", "oldest"}};
    run_random(o);
  }
  SECTION("eos") {
    o.eos = true;
    run_random(o);
  }
  for (const char* order : {"priority", "shortest_prompt", "longest_prefix", "length_buckets"}) {
    SECTION(std::string("order ") + order) {
      o.overrides = {{"order", order}, {"victim", "lowest_priority"}};
      run_random(o);
    }
  }
  SECTION("watermark, threshold, small budget") {
    o.overrides = {{"watermark", "0.05"}, {"long_prefill_token_threshold", "64"}, {"max_num_batched_tokens", "256"},
                   {"max_num_seqs", "16"}};
    run_random(o);
  }
  SECTION("overload limits") {
    o.overrides = {{"max_queued_requests", "6"}, {"max_queue_time_ms", "20"}};
    run_random(o);
  }
  SECTION("overload limits, two plans in flight, dynamic") {
    o.preset = "dynamic";
    o.plans_in_flight = 2;
    // A queue timeout above the 50 ms batch timeout, or no batch could form.
    o.overrides = {{"max_queued_requests", "12"}, {"max_queue_time_ms", "120"}};
    run_random(o);
  }
  SECTION("contiguous") {
    o.num_blocks = 1024;
    o.overrides = {{"contiguous", "true"}};
    run_random(o);
  }
  SECTION("static with swap") {
    o.preset = "static";
    o.swap = true;
    run_random(o);
  }
}

TEST_CASE("random workloads with KV tiers below HBM keep every invariant", "[random][tiers]") {
  Options o;
  o.preset = "vllm";
  o.requests = 600;
  o.seed = 19;
  o.num_blocks = 120;
  o.tiers = {{"dram", 60}, {"ssd", 200}};
  SECTION("vllm") { run_random(o); }
  SECTION("swap, two plans in flight") {
    o.swap = true;
    o.plans_in_flight = 2;
    run_random(o);
  }
  SECTION("prefill-first, longest prefix") {
    o.preset = "orca";
    o.overrides = {{"order", "longest_prefix"}, {"enable_prefix_caching", "true"}};
    run_random(o);
  }
  SECTION("one tiny tier, speculative, eos") {
    o.tiers = {{"dram", 3}};
    o.spec = 2;
    o.eos = true;
    run_random(o);
  }
}

TEST_CASE("random workloads with speculative lookahead keep every invariant", "[random][speculative]") {
  Options o;
  o.preset = "vllm";
  o.requests = 500;
  o.seed = 11;
  o.spec = 3;
  SECTION("vllm") { run_random(o); }
  SECTION("prefill-first") {
    o.preset = "orca";
    run_random(o);
  }
  SECTION("swap") {
    o.swap = true;
    run_random(o);
  }
  SECTION("two plans in flight, eos") {
    o.plans_in_flight = 2;
    o.eos = true;
    run_random(o);
  }
  SECTION("small budget, tight cache, k 7") {
    o.spec = 7;
    o.num_blocks = 100;
    o.overrides = {{"max_num_batched_tokens", "96"}, {"long_prefill_token_threshold", "64"}};
    run_random(o);
  }
  SECTION("token-level KV") {
    o.preset = "lightllm";
    o.num_blocks = 160 * 16;
    run_random(o);
  }
  SECTION("contiguous") {
    o.num_blocks = 1024;
    o.overrides = {{"contiguous", "true"}};
    run_random(o);
  }
}

}  // namespace twin::test
