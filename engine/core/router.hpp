#pragma once
// Picks a replica for an arriving request through a routing policy
// (policy.hpp; the built-in ones are policy_routers.cpp). Deterministic:
// ties go to the lowest index; random choices come from the seeded generator. The router
// reads replicas through a view: the live replicas (the default, exact), or
// what it knew at its last refresh (router_snapshot.hpp, a refresh period
// > 0), as production routers decide from periodically scraped metrics.
#include <algorithm>
#include <concepts>
#include <memory>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/policy.hpp"
#include "engine/core/replica.hpp"
#include "engine/core/request.hpp"

namespace twin {

// The registered router names (policy_list.hpp), in registration order.
std::vector<std::string> router_names();
// The name itself when registered; throws UsageError listing the known names.
std::string router_policy(std::string_view name);

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

// A View's figures through the ReplicaLoads interface the policies read.
template <RouterView View>
class ReplicaLoadsOf final : public ReplicaLoads {
 public:
  explicit ReplicaLoadsOf(const View& view) : view_(view) {}
  std::int32_t size() const override { return static_cast<std::int32_t>(view_.size()); }
  std::int64_t outstanding(std::int32_t i) const override { return view_.outstanding(i); }
  double kv_usage(std::int32_t i) const override { return view_.kv_usage(i); }
  std::int64_t waiting(std::int32_t i) const override { return view_.waiting(i); }
  std::int64_t running(std::int32_t i) const override { return view_.running(i); }
  std::int32_t cached_prefix_tokens(std::int32_t i, const Request& request) const override {
    return view_.cached_prefix_tokens(i, request);
  }

 private:
  const View& view_;
};

// The routing policy of a name (routing_policies(), policy.hpp), seeded.
class Router {
 public:
  Router(std::string_view policy, std::uint64_t seed);
  std::int32_t pick(const Request& request, std::span<const Replica* const> replicas) {
    return pick_from(request, LiveReplicas(replicas));
  }
  template <RouterView View>
  std::int32_t pick_from(const Request& request, const View& view) {
    if (view.size() == 0) throw_no_replicas();
    return policy_->pick(request, ReplicaLoadsOf<View>(view));
  }
  const std::string& policy() const { return name_; }
  // Whether the policy reads cached prefixes (a snapshot must gather them).
  bool reads_cached_prefix() const { return policy_->reads_cached_prefix(); }

 private:
  [[noreturn]] static void throw_no_replicas();
  std::string name_;
  std::unique_ptr<RoutingPolicy> policy_;
};

}  // namespace twin
