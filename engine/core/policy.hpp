#pragma once
// The serving core's plug-in policies (docs/policies.md): queue order,
// admission, preemption victim, batch formation and routing, each a small
// interface made by name from a registry (policy_registry.hpp). The
// scheduler and the router hold one of each and call it where a decision is
// made: once per enqueue, admission, preemption, batch or routed request,
// never per token.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/types.hpp"
#include "engine/core/policy_registry.hpp"
#include "engine/core/request.hpp"

namespace twin {

struct SchedulerConfig;

// ---- queue order ---------------------------------------------------------------

// How RequestQueue walks its entries.
enum class QueueService : std::uint8_t {
  key_order,        // ascending key, ties in enqueue order
  rotating_keys,    // key by key from the last one served, wrapping around (length buckets)
  cached_prefix,    // longest cached prefix first, looked up at admission (SGLang LPM)
};

class QueueOrderPolicy {
 public:
  virtual ~QueueOrderPolicy() = default;
  // The waiting request's primary key, lower served first; equal keys keep
  // enqueue order, a preempted request ahead of its key's others. Called
  // once per enqueue: num_output is what it has generated so far (non-zero
  // after a recompute preemption).
  virtual std::int64_t key(const Request& request, std::int32_t num_output) const = 0;
  virtual QueueService service() const { return QueueService::key_order; }
  // True when the queue is in arrival order (all keys equal): admission may
  // then stop at the first request the plan cannot see yet (async scheduling).
  virtual bool arrival_order() const { return false; }
};

// ---- admission -----------------------------------------------------------------

// A waiting request about to be admitted.
struct AdmissionCandidate {
  std::int32_t prompt_len = 0;
  std::int32_t output_len = 0;
  std::int32_t known_tokens = 0;  // prompt + outputs so far (a resumed request)
  // The running requests' outputs still to come, each at most
  // running_output_clip(); 0 unless the policy asks for it.
  std::int64_t running_outputs_left = 0;
};

// What the previous plan did, for a policy that adapts to it.
struct AdmissionStep {
  bool idle = false;       // nothing was running
  bool preempted = false;  // a running request was preempted
  bool decoded = false;    // the step decoded running requests
  // After a preemption: the outputs the running requests have made and the
  // outputs they will make in all.
  std::int64_t running_outputs_done = 0, running_outputs_total = 0;
  std::int32_t running = 0;
};

class AdmissionPolicy {
 public:
  virtual ~AdmissionPolicy() = default;
  // Tokens the free KV blocks must be able to hold for the request to be
  // admitted, beyond what this step allocates (0: only the step's chunk).
  virtual std::int32_t must_fit(const AdmissionCandidate& candidate) const = 0;
  // > 0: the scheduler fills running_outputs_left, each running request's
  // remaining outputs clipped to this.
  virtual std::int32_t running_output_clip() const { return 0; }
  // Called once per plan, before it is built, with what the previous one did.
  virtual void observe(const AdmissionStep&) {}
};

// ---- preemption victim ---------------------------------------------------------

// The running requests in admission order, as a victim policy reads them.
class RunningView {
 public:
  virtual ~RunningView() = default;
  virtual std::size_t size() const = 0;
  // False for a request in an outstanding plan: never a victim.
  virtual bool eligible(std::size_t k) const = 0;
  virtual const Request& request(std::size_t k) const = 0;
  virtual std::int32_t num_output(std::size_t k) const = 0;
};

class VictimPolicy {
 public:
  virtual ~VictimPolicy() = default;
  // The index of an eligible request to preempt, or size() when none is.
  virtual std::size_t pick(const RunningView& running) const = 0;
};

// ---- batch formation -----------------------------------------------------------

// The waiting queue, as a batch policy reads it (the oldest entry costs a scan).
class WaitingView {
 public:
  virtual ~WaitingView() = default;
  virtual std::size_t size() const = 0;
  virtual Time oldest_queued_at() const = 0;
};

class BatchPolicy {
 public:
  virtual ~BatchPolicy() = default;
  // False: continuous batching (requests join and leave every step); true:
  // batches of batch_size form from the queue and run to completion.
  virtual bool forms_batches() const = 0;
  // With no batch running and requests waiting: nullopt when a batch forms
  // now, else the time it will (the scheduler wakes then).
  virtual std::optional<Time> ready_at(const WaitingView& waiting) const = 0;
};

// ---- routing -------------------------------------------------------------------

// What a router reads of replica i of size() (router.hpp's RouterView,
// type-erased).
class ReplicaLoads {
 public:
  virtual ~ReplicaLoads() = default;
  virtual std::int32_t size() const = 0;
  virtual std::int64_t outstanding(std::int32_t i) const = 0;  // admitted, not yet ended
  virtual double kv_usage(std::int32_t i) const = 0;
  virtual std::int64_t waiting(std::int32_t i) const = 0;  // queued, not yet scheduled
  virtual std::int64_t running(std::int32_t i) const = 0;
  virtual std::int32_t cached_prefix_tokens(std::int32_t i, const Request& request) const = 0;
};

class RoutingPolicy {
 public:
  virtual ~RoutingPolicy() = default;
  // A replica index in [0, loads.size()); size() >= 1. Ties should go to the
  // lowest index and randomness come from the seed given to the factory, so
  // a run repeats.
  virtual std::int32_t pick(const Request& request, const ReplicaLoads& loads) = 0;
  // True when pick() reads cached_prefix_tokens: a router with a refresh
  // period then gathers every replica's hits per request (costly).
  virtual bool reads_cached_prefix() const { return false; }
};

// ---- the registries ------------------------------------------------------------

// A built-in policy's factory, as policy_list.hpp names it.
using QueueOrderFactory = std::unique_ptr<QueueOrderPolicy>(const SchedulerConfig&);
using AdmissionFactory = std::unique_ptr<AdmissionPolicy>(const SchedulerConfig&);
using VictimFactory = std::unique_ptr<VictimPolicy>(const SchedulerConfig&);
using BatchFactory = std::unique_ptr<BatchPolicy>(const SchedulerConfig&);
using RoutingFactory = std::unique_ptr<RoutingPolicy>(std::uint64_t seed);

using QueueOrderRegistry = PolicyRegistry<QueueOrderPolicy, const SchedulerConfig&>;
using AdmissionRegistry = PolicyRegistry<AdmissionPolicy, const SchedulerConfig&>;
using VictimRegistry = PolicyRegistry<VictimPolicy, const SchedulerConfig&>;
using BatchRegistry = PolicyRegistry<BatchPolicy, const SchedulerConfig&>;
using RoutingRegistry = PolicyRegistry<RoutingPolicy, std::uint64_t /*seed*/>;

// Each holds the built-in policies (policy_list.hpp) from its first use.
// Adding at run time (the Python module does) must happen before any run
// that could look names up, as registries are not locked.
QueueOrderRegistry& queue_orders();
AdmissionRegistry& admission_policies();
VictimRegistry& victim_policies();
BatchRegistry& batch_policies();
RoutingRegistry& routing_policies();

}  // namespace twin
