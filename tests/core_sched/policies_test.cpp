// The plug-in policies (engine/core/policy.hpp, docs/policies.md): the
// registries, the worked example (shortest_remaining) and a policy added at
// run time, called by the scheduler and the router through the interfaces.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "engine/core/policy.hpp"
#include "engine/core/router.hpp"
#include "tests/core_sched/sched_test_util.hpp"

namespace twin::test {
namespace {

// The order in which requests are first scheduled by a one-seat replica.
std::vector<RequestId> service_order(const std::string& order, const std::vector<Request>& requests) {
  ReplicaConfig cfg = config_for("sarathi", 1000);
  cfg.scheduler.max_num_seqs = 1;
  cfg.scheduler.order = order;
  Replica r(cfg, 0);
  for (const Request& q : requests) r.add(q, 0);
  std::vector<RequestId> out;
  for (Time t = 0; r.has_work() && t < 10'000 * kNsPerMs; t += kNsPerMs) {
    const StepPlan p = step(r, t);
    for (const auto& q : p.seqs) {
      if (std::find(out.begin(), out.end(), q.id) == out.end()) out.push_back(q.id);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("registries list the built-in policies in policy_list.hpp's order", "[policy]") {
  CHECK(queue_orders().names() == std::vector<std::string>{"fcfs", "priority", "shortest_prompt", "longest_prefix",
                                                           "length_buckets", "shortest_remaining"});
  CHECK(admission_policies().names() == std::vector<std::string>{"chunk", "prompt", "sequence", "sglang"});
  CHECK(victim_policies().names() == std::vector<std::string>{"newest", "oldest", "lowest_priority"});
  CHECK(batch_policies().names() == std::vector<std::string>{"continuous", "static", "dynamic"});
  CHECK(router_names() == routing_policies().names());
  CHECK(routing_policies().names().size() == 6);
}

TEST_CASE("an unknown policy name is refused with the known names", "[policy]") {
  try {
    (void)queue_orders().make("lifo", SchedulerConfig{});
    FAIL("no throw");
  } catch (const UsageError& e) {
    const std::string what = e.what();
    CHECK(what.find("unknown queue order 'lifo'") != std::string::npos);
    CHECK(what.find("shortest_remaining") != std::string::npos);
  }
  SchedulerConfig c;
  CHECK_THROWS_AS(set_scheduler_option(c, "order", "lifo"), UsageError);
  CHECK_THROWS_AS(set_scheduler_option(c, "victim", "random"), UsageError);
  set_scheduler_option(c, "order", "shortest_remaining");
  CHECK(c.order == "shortest_remaining");
  c.batching = "bogus";  // set in code, past set_scheduler_option
  CHECK_THROWS_AS(validate(c), UsageError);
  CHECK_THROWS_AS(queue_orders().add("fcfs", "again", [](const SchedulerConfig&) { return std::unique_ptr<QueueOrderPolicy>(); }), Error);
}

TEST_CASE("shortest_remaining serves the fewest outputs left first, fcfs in arrival order", "[policy][srf]") {
  const std::vector<Request> requests = {make_request(1, 64, 30), make_request(2, 64, 5), make_request(3, 64, 12),
                                         make_request(4, 64, 5)};
  CHECK(service_order("fcfs", requests) == std::vector<RequestId>{1, 2, 3, 4});
  // Ties (2 and 4) in arrival order.
  CHECK(service_order("shortest_remaining", requests) == std::vector<RequestId>{2, 4, 3, 1});
}

TEST_CASE("shortest_remaining keys a preempted request by what it still owes", "[policy][srf]") {
  const auto srf = queue_orders().make("shortest_remaining", SchedulerConfig{});
  const Request r = make_request(1, 100, 40);
  CHECK(srf->key(r, 0) == 40);
  CHECK(srf->key(r, 25) == 15);
  CHECK(srf->service() == QueueService::key_order);
  CHECK_FALSE(srf->arrival_order());
}

namespace {

// Always the last replica: a policy added at run time, as a user's would be.
class LastReplica final : public RoutingPolicy {
 public:
  explicit LastReplica(int* calls) : calls_(calls) {}
  std::int32_t pick(const Request&, const ReplicaLoads& loads) override {
    ++*calls_;
    return loads.size() - 1;
  }

 private:
  int* calls_;
};

// Preempts the running request with the largest prompt.
class LargestPrompt final : public VictimPolicy {
 public:
  std::size_t pick(const RunningView& running) const override {
    std::size_t best = running.size();
    for (std::size_t k = 0; k < running.size(); ++k) {
      if (running.eligible(k) && (best == running.size() || running.request(k).prompt_len > running.request(best).prompt_len)) {
        best = k;
      }
    }
    return best;
  }
};

}  // namespace

TEST_CASE("a router registered at run time is what Router calls", "[policy][router]") {
  int calls = 0;
  routing_policies().add("test_last", "always the last replica",
                         [&](std::uint64_t) { return std::make_unique<LastReplica>(&calls); });
  std::vector<std::unique_ptr<Replica>> owned;
  std::vector<const Replica*> ptrs;
  for (int i = 0; i < 3; ++i) {
    owned.push_back(std::make_unique<Replica>(config_for("vllm", 100), i));
    ptrs.push_back(owned.back().get());
  }
  Router router("test_last", 7);
  CHECK(router.pick(make_request(1, 10, 10), ptrs) == 2);
  CHECK(router.pick(make_request(2, 10, 10), ptrs) == 2);
  CHECK(calls == 2);
  CHECK(router.policy() == "test_last");
  CHECK(routing_policies().remove("test_last"));
  CHECK_THROWS_AS(Router("test_last", 7), UsageError);
}

TEST_CASE("a victim policy registered at run time picks who is preempted", "[policy][victim]") {
  victim_policies().add("test_largest_prompt", "largest prompt first",
                        [](const SchedulerConfig&) { return std::make_unique<LargestPrompt>(); });
  auto preempted_first = [](const std::string& victim) {
    ReplicaConfig cfg = config_for("sarathi", 12);  // 192 tokens of KV
    cfg.kv.watermark = 0;
    cfg.scheduler.victim = victim;
    Replica r(cfg, 0);
    r.add(make_request(1, 40, 100), 0);  // the largest prompt, admitted first
    r.add(make_request(2, 20, 100), 0);
    r.add(make_request(3, 30, 100), 0);
    for (Time t = 0; t < 1000 * kNsPerMs; t += kNsPerMs) {
      const StepPlan p = step(r, t);
      if (!p.preempted.empty()) return p.preempted.front();
    }
    return RequestId{0};
  };
  CHECK(preempted_first("newest") == 3);
  CHECK(preempted_first("oldest") == 1);
  CHECK(preempted_first("test_largest_prompt") == 1);
  CHECK(victim_policies().remove("test_largest_prompt"));
}

}  // namespace twin::test
