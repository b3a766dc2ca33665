#pragma once
// Picks a replica for an arriving request. Deterministic: ties go to the
// lowest index; random choices come from the seeded generator.
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
};

std::vector<std::string> router_names();
// Throws UsageError listing the known names.
RouterPolicy router_policy(std::string_view name);
std::string_view router_name(RouterPolicy policy);

class Router {
 public:
  Router(RouterPolicy policy, std::uint64_t seed);
  std::int32_t pick(const Request& request, std::span<const Replica* const> replicas);

 private:
  RouterPolicy policy_;
  std::uint64_t rng_state_;
  std::int32_t next_ = 0;
};

}  // namespace twin
