#pragma once
// Picks a replica for an arriving request. Deterministic: ties go to the
// lowest index; random choices come from the seeded generator. The router
// reads replicas through a view: the live replicas (the default, exact), or
// what it knew at its last refresh (router_snapshot.hpp, a refresh period
// > 0), as production routers decide from periodically scraped metrics.
#include <algorithm>
#include <concepts>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/replica.hpp"
#include "engine/core/request.hpp"

namespace twin {

enum class RouterPolicy {
  round_robin,
  least_outstanding,  // fewest admitted, unfinished requests
  least_kv,           // lowest KV usage
  prefix_affinity,    // longest cached prefix, ties to the least loaded
  power_of_two,       // two random candidates, the less loaded wins
  dp_balance,         // vLLM's DP coordinator: least waiting x 4 + running
};

std::vector<std::string> router_names();
// Throws UsageError listing the known names.
RouterPolicy router_policy(std::string_view name);
std::string_view router_name(RouterPolicy policy);

// What a router reads of replica i of n.
template <class V>
concept RouterView = requires(const V& view, const Request& request, std::int32_t i) {
  { view.size() } -> std::convertible_to<std::int32_t>;
  { view.outstanding(i) } -> std::convertible_to<std::int64_t>;  // admitted, not yet ended
  { view.kv_usage(i) } -> std::convertible_to<double>;
  { view.waiting(i) } -> std::convertible_to<std::int64_t>;  // queued, not yet scheduled
  { view.running(i) } -> std::convertible_to<std::int64_t>;
  { view.cached_prefix_tokens(i, request) } -> std::convertible_to<std::int32_t>;
};

// The replicas as they are now.
class LiveReplicas {
 public:
  explicit LiveReplicas(std::span<const Replica* const> replicas) : replicas_(replicas) {}
  std::int32_t size() const { return static_cast<std::int32_t>(replicas_.size()); }
  std::int64_t outstanding(std::int32_t i) const { return at(i).num_outstanding(); }
  double kv_usage(std::int32_t i) const { return at(i).kv_usage(); }
  std::int64_t waiting(std::int32_t i) const { return at(i).num_waiting(); }
  std::int64_t running(std::int32_t i) const { return at(i).num_running(); }
  std::int32_t cached_prefix_tokens(std::int32_t i, const Request& request) const {
    return at(i).cached_prefix_tokens(request);
  }

 private:
  const Replica& at(std::int32_t i) const { return *replicas_[static_cast<std::size_t>(i)]; }
  std::span<const Replica* const> replicas_;
};

namespace router_detail {
inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
}  // namespace router_detail

class Router {
 public:
  Router(RouterPolicy policy, std::uint64_t seed);
  std::int32_t pick(const Request& request, std::span<const Replica* const> replicas) {
    return pick_from(request, LiveReplicas(replicas));
  }
  template <RouterView View>
  std::int32_t pick_from(const Request& request, const View& view);
  RouterPolicy policy() const { return policy_; }

 private:
  [[noreturn]] static void throw_no_replicas();
  RouterPolicy policy_;
  std::uint64_t rng_state_;
  std::int32_t next_ = 0;
};

template <RouterView View>
std::int32_t Router::pick_from(const Request& request, const View& view) {
  const std::int32_t n = view.size();
  if (n == 0) throw_no_replicas();
  auto load = [&](std::int32_t i) { return view.outstanding(i); };
  // Strict comparisons while scanning upwards: ties go to the lowest index.
  switch (policy_) {
    case RouterPolicy::round_robin: {
      const std::int32_t pick = next_ % n;
      next_ = (pick + 1) % n;
      return pick;
    }
    case RouterPolicy::least_outstanding: {
      std::int32_t best = 0;
      for (std::int32_t i = 1; i < n; ++i) {
        if (load(i) < load(best)) best = i;
      }
      return best;
    }
    case RouterPolicy::least_kv: {
      std::int32_t best = 0;
      for (std::int32_t i = 1; i < n; ++i) {
        const double a = view.kv_usage(i);
        const double b = view.kv_usage(best);
        if (a < b || (a == b && load(i) < load(best))) best = i;
      }
      return best;
    }
    case RouterPolicy::prefix_affinity: {
      std::int32_t best = 0;
      std::int32_t best_hit = view.cached_prefix_tokens(0, request);
      for (std::int32_t i = 1; i < n; ++i) {
        const std::int32_t hit = view.cached_prefix_tokens(i, request);
        if (hit > best_hit || (hit == best_hit && load(i) < load(best))) {
          best = i;
          best_hit = hit;
        }
      }
      return best;
    }
    case RouterPolicy::power_of_two: {
      if (n == 1) return 0;
      const auto a = static_cast<std::int32_t>(router_detail::splitmix64(rng_state_) % static_cast<std::uint64_t>(n));
      auto b = static_cast<std::int32_t>(router_detail::splitmix64(rng_state_) % static_cast<std::uint64_t>(n - 1));
      if (b >= a) ++b;  // two distinct candidates
      const std::int32_t lo = std::min(a, b), hi = std::max(a, b);
      return load(hi) < load(lo) ? hi : lo;
    }
    case RouterPolicy::dp_balance: {
      // vLLM's DP load balancer (v1/engine/core_client.py,
      // DPLBAsyncMPClient.get_core_engine_for_request): a queued request
      // weighs four running ones; the lowest score wins, ties to the first.
      auto score = [&](std::int32_t i) { return view.waiting(i) * 4 + view.running(i); };
      std::int32_t best = 0;
      for (std::int32_t i = 1; i < n; ++i) {
        if (score(i) < score(best)) best = i;
      }
      return best;
    }
  }
  return 0;
}

}  // namespace twin
