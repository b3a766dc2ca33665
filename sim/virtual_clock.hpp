#pragma once
// The simulator's clock for the serving loop (engine/core/serving_loop.hpp):
// time jumps from event to event, and a step lasts what each replica's cost
// model prices it at, stage by stage through the pipeline. Nothing waits;
// a run stops early only when its stop hook says so (Ctrl-C in `simulate`).
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "engine/core/replica.hpp"
#include "engine/core/request.hpp"
#include "engine/core/serving_loop.hpp"
#include "engine/core/step_plan.hpp"
#include "hwprofiles/hardware_desc.hpp"
#include "models/step_ops.hpp"
#include "sim/acceptance_model.hpp"
#include "sim/cost_model.hpp"
#include "sim/kv_transfer.hpp"
#include "sim/kv_tier_model.hpp"

namespace twin {

class VirtualClock {
 public:
  // One entry per replica, in replica order.
  struct Pricing {
    std::shared_ptr<CostModel> cost;  // shared by a group's replicas
    std::int32_t stages = 1;          // pipeline stages
    // Speculative decoding: draws each step's accepted counts (null: the
    // replica runs without speculation).
    std::shared_ptr<AcceptanceModel> acceptance;
    // Loads from the KV tiers below HBM (null: the replica has none).
    std::shared_ptr<const KvTierModel> tiers;
    // Energy (issue 44): a device's power figures, the devices of a stage.
    PowerDesc power;
    std::int32_t stage_gpus = 1;
  };
  // `transfers` prices KV transfers between a disaggregated cluster's pools
  // (null: none; a transfer is then an error).
  // `first_replica`: the cluster index of the first entry (a clock for one
  // replica of a windowed run, sim/windowed_simulator.hpp); cost and
  // acceptance models see cluster indices.
  explicit VirtualClock(const std::vector<Pricing>& replicas, std::shared_ptr<KvTransferModel> transfers = nullptr,
                        std::int32_t first_replica = 0);

  // Asked at every turn of the serving loop (never, when unset); sticky once
  // true. The hook is the command's (a signal flag) or a test's; the clock
  // itself reads nothing.
  void set_stop(std::function<bool()> stop) { stop_ = std::move(stop); }
  bool stop_requested() {
    if (!stopped_ && stop_ && stop_()) stopped_ = true;
    return stopped_;
  }
  static constexpr bool wait_until(Time) { return true; }
  static constexpr Time read(Time now) { return now; }
  static constexpr void admit(Request&, const Replica&) {}
  static constexpr void on_ended(const RequestRecord&) {}

  // Each stage starts the plan when the previous stage has handed it on and
  // its own earlier plan is done; a stage busy with an earlier plan delays
  // it, which is where pipeline bubbles come from.
  StepTiming run_step(std::int32_t index, const StepPlan& plan, const Replica& replica, Time now, StepResult& result);

  // A lockstep group's step (vLLM's MoE DP ranks, ServingOptions::lockstep):
  // each member with a plan is priced on its own batch with the experts
  // routed every member's tokens (StepInput::group_tokens); the step lasts
  // the slowest member's price, and a member without a plan (a dummy batch,
  // never slower than a real one) is busy as long. Pipeline stages: one.
  StepTiming run_lockstep(std::span<const std::int32_t> members, std::span<const StepPlan* const> plans,
                          std::span<StepResult* const> results, Time now);
  TransferTiming kv_transfer(const InboundTransfer& transfer);

  // Time steps spent loading KV from the tiers below HBM, all replicas
  // (with load overlap: only the part compute did not hide).
  Time tier_load_stall() const { return tier_load_stall_; }

 private:
  struct Lane {
    std::shared_ptr<CostModel> cost;
    std::int32_t stages = 1;
    std::shared_ptr<AcceptanceModel> acceptance;
    std::shared_ptr<const KvTierModel> tiers;
    std::vector<Time> stage_free_at;  // when each pipeline stage can start another plan
    PowerDesc power;
    std::int32_t stage_gpus = 1;
    bool energy_known = false;  // power figures and a cost model that splits steps
  };
  // Adds one stage's busy time to a step's energy: `mix` of it in ops by
  // binding roof, the rest at idle draw (docs/outputs.md, "Energy").
  struct StageEnergy {
    double uj = 0, baseline_uj = 0;
    void add(const Lane& lane, const StepMix& mix, Time busy_ns);
    void write(const Lane& lane, StepResult& result) const;
  };
  void build_shape(const StepPlan& plan);

  std::vector<Lane> lanes_;
  std::shared_ptr<KvTransferModel> transfers_;
  std::int32_t first_replica_ = 0;
  BatchShape shape_;  // reused for every plan
  Time tier_load_stall_ = 0;
  std::vector<StepMix> lockstep_busy_;  // run_lockstep's scratch, by member
  std::function<bool()> stop_;
  bool stopped_ = false;
};

static_assert(ServingClock<VirtualClock>);
static_assert(TransferClock<VirtualClock>);
static_assert(LockstepClock<VirtualClock>);

}  // namespace twin
