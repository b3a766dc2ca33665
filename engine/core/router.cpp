#include "engine/core/router.hpp"

#include <string>

#include "base/error.hpp"

namespace twin {

std::vector<std::string> router_names() { return routing_policies().names(); }

std::string router_policy(std::string_view name) {
  routing_policies().check(name);
  return std::string(name);
}

Router::Router(std::string_view policy, std::uint64_t seed)
    : name_(policy), policy_(routing_policies().make(policy, seed)) {}

void Router::throw_no_replicas() { throw Error("router: no replicas to pick from"); }

}  // namespace twin
