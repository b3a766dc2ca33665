#include "engine/core/router.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "base/error.hpp"

namespace twin {

namespace {

constexpr std::pair<const char*, RouterPolicy> kPolicies[] = {{"round_robin", RouterPolicy::round_robin},
                                                              {"least_outstanding", RouterPolicy::least_outstanding},
                                                              {"least_kv", RouterPolicy::least_kv},
                                                              {"prefix_affinity", RouterPolicy::prefix_affinity},
                                                              {"power_of_two", RouterPolicy::power_of_two}};

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace

std::vector<std::string> router_names() {
  std::vector<std::string> out;
  for (const auto& [name, p] : kPolicies) out.emplace_back(name);
  return out;
}

RouterPolicy router_policy(std::string_view name) {
  std::string known;
  for (const auto& [n, p] : kPolicies) {
    if (name == n) return p;
    known += (known.empty() ? "" : ", ") + std::string(n);
  }
  throw UsageError("unknown router policy '" + excerpt(name) + "': known policies are " + known);
}

std::string_view router_name(RouterPolicy policy) {
  for (const auto& [n, p] : kPolicies) {
    if (p == policy) return n;
  }
  return "unknown";
}

Router::Router(RouterPolicy policy, std::uint64_t seed) : policy_(policy), rng_state_(seed) {}

std::int32_t Router::pick(const Request& request, std::span<const Replica* const> replicas) {
  const auto n = static_cast<std::int32_t>(replicas.size());
  if (n == 0) throw Error("router: no replicas to pick from");
  auto load = [&](std::int32_t i) { return replicas[static_cast<std::size_t>(i)]->num_outstanding(); };
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
        const double a = replicas[static_cast<std::size_t>(i)]->kv_usage();
        const double b = replicas[static_cast<std::size_t>(best)]->kv_usage();
        if (a < b || (a == b && load(i) < load(best))) best = i;
      }
      return best;
    }
    case RouterPolicy::prefix_affinity: {
      std::int32_t best = 0;
      std::int32_t best_hit = replicas[0]->cached_prefix_tokens(request);
      for (std::int32_t i = 1; i < n; ++i) {
        const std::int32_t hit = replicas[static_cast<std::size_t>(i)]->cached_prefix_tokens(request);
        if (hit > best_hit || (hit == best_hit && load(i) < load(best))) {
          best = i;
          best_hit = hit;
        }
      }
      return best;
    }
    case RouterPolicy::power_of_two: {
      if (n == 1) return 0;
      const auto a = static_cast<std::int32_t>(splitmix64(rng_state_) % static_cast<std::uint64_t>(n));
      auto b = static_cast<std::int32_t>(splitmix64(rng_state_) % static_cast<std::uint64_t>(n - 1));
      if (b >= a) ++b;  // two distinct candidates
      const std::int32_t lo = std::min(a, b), hi = std::max(a, b);
      return load(hi) < load(lo) ? hi : lo;
    }
  }
  return 0;
}

}  // namespace twin
