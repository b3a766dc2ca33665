#include "engine/core/policy_registry.hpp"

#include <type_traits>

#include "engine/core/policy.hpp"

namespace twin {

// The factories policy_list.hpp names, each defined in its policy's file.
#define TWIN_POLICY(Kind, factory, name, help) Kind##Factory factory;
#include "engine/core/policy_list.hpp"
#undef TWIN_POLICY

namespace {

// A registry of the kind of R holding the lines of policy_list.hpp of that kind.
template <class R>
R registered(const char* kind) {
  R r(kind);
#define TWIN_POLICY(Kind, factory, name, help) \
  if constexpr (std::is_same_v<R, Kind##Registry>) r.add(name, help, factory);
#include "engine/core/policy_list.hpp"
#undef TWIN_POLICY
  return r;
}

}  // namespace

QueueOrderRegistry& queue_orders() {
  static QueueOrderRegistry registry = registered<QueueOrderRegistry>("queue order");
  return registry;
}

AdmissionRegistry& admission_policies() {
  static AdmissionRegistry registry = registered<AdmissionRegistry>("admission reserve");
  return registry;
}

VictimRegistry& victim_policies() {
  static VictimRegistry registry = registered<VictimRegistry>("victim policy");
  return registry;
}

BatchRegistry& batch_policies() {
  static BatchRegistry registry = registered<BatchRegistry>("batching mode");
  return registry;
}

RoutingRegistry& routing_policies() {
  static RoutingRegistry registry = registered<RoutingRegistry>("router policy");
  return registry;
}

}  // namespace twin
