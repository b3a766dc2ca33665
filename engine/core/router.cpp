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
                                                              {"power_of_two", RouterPolicy::power_of_two},
                                                              {"dp_balance", RouterPolicy::dp_balance}};

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

void Router::throw_no_replicas() { throw Error("router: no replicas to pick from"); }

}  // namespace twin
