// The built-in routers (policy_list.hpp registers them). Strict comparisons
// while scanning upwards: ties go to the lowest index.
#include <algorithm>

#include "engine/core/policy.hpp"

namespace twin {

namespace {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

class RoundRobin final : public RoutingPolicy {
 public:
  std::int32_t pick(const Request&, const ReplicaLoads& loads) override {
    const std::int32_t n = loads.size();
    const std::int32_t pick = next_ % n;
    next_ = (pick + 1) % n;
    return pick;
  }

 private:
  std::int32_t next_ = 0;
};

class LeastOutstanding final : public RoutingPolicy {
 public:
  std::int32_t pick(const Request&, const ReplicaLoads& loads) override {
    std::int32_t best = 0;
    for (std::int32_t i = 1; i < loads.size(); ++i) {
      if (loads.outstanding(i) < loads.outstanding(best)) best = i;
    }
    return best;
  }
};

class LeastKv final : public RoutingPolicy {
 public:
  std::int32_t pick(const Request&, const ReplicaLoads& loads) override {
    std::int32_t best = 0;
    for (std::int32_t i = 1; i < loads.size(); ++i) {
      const double a = loads.kv_usage(i);
      const double b = loads.kv_usage(best);
      if (a < b || (a == b && loads.outstanding(i) < loads.outstanding(best))) best = i;
    }
    return best;
  }
};

class PrefixAffinity final : public RoutingPolicy {
 public:
  std::int32_t pick(const Request& request, const ReplicaLoads& loads) override {
    std::int32_t best = 0;
    std::int32_t best_hit = loads.cached_prefix_tokens(0, request);
    for (std::int32_t i = 1; i < loads.size(); ++i) {
      const std::int32_t hit = loads.cached_prefix_tokens(i, request);
      if (hit > best_hit || (hit == best_hit && loads.outstanding(i) < loads.outstanding(best))) {
        best = i;
        best_hit = hit;
      }
    }
    return best;
  }
  bool reads_cached_prefix() const override { return true; }
};

class PowerOfTwo final : public RoutingPolicy {
 public:
  explicit PowerOfTwo(std::uint64_t seed) : state_(seed) {}
  std::int32_t pick(const Request&, const ReplicaLoads& loads) override {
    const std::int32_t n = loads.size();
    if (n == 1) return 0;
    const auto a = static_cast<std::int32_t>(splitmix64(state_) % static_cast<std::uint64_t>(n));
    auto b = static_cast<std::int32_t>(splitmix64(state_) % static_cast<std::uint64_t>(n - 1));
    if (b >= a) ++b;  // two distinct candidates
    const std::int32_t lo = std::min(a, b), hi = std::max(a, b);
    return loads.outstanding(hi) < loads.outstanding(lo) ? hi : lo;
  }

 private:
  std::uint64_t state_;
};

// vLLM's DP load balancer (v1/engine/core_client.py,
// DPLBAsyncMPClient.get_core_engine_for_request): a queued request weighs
// four running ones; the lowest score wins, ties to the first.
class DpBalance final : public RoutingPolicy {
 public:
  std::int32_t pick(const Request&, const ReplicaLoads& loads) override {
    auto score = [&](std::int32_t i) { return loads.waiting(i) * 4 + loads.running(i); };
    std::int32_t best = 0;
    for (std::int32_t i = 1; i < loads.size(); ++i) {
      if (score(i) < score(best)) best = i;
    }
    return best;
  }
};

}  // namespace

std::unique_ptr<RoutingPolicy> make_round_robin_router(std::uint64_t) { return std::make_unique<RoundRobin>(); }
std::unique_ptr<RoutingPolicy> make_least_outstanding_router(std::uint64_t) {
  return std::make_unique<LeastOutstanding>();
}
std::unique_ptr<RoutingPolicy> make_least_kv_router(std::uint64_t) { return std::make_unique<LeastKv>(); }
std::unique_ptr<RoutingPolicy> make_prefix_affinity_router(std::uint64_t) {
  return std::make_unique<PrefixAffinity>();
}
std::unique_ptr<RoutingPolicy> make_power_of_two_router(std::uint64_t seed) {
  return std::make_unique<PowerOfTwo>(seed);
}
std::unique_ptr<RoutingPolicy> make_dp_balance_router(std::uint64_t) { return std::make_unique<DpBalance>(); }

}  // namespace twin
