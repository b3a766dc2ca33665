#include "sim/virtual_clock.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "base/error.hpp"

namespace twin {

namespace {
// A stage that has run no step yet: its free time is this mark, not 0, so
// that its first step is never taken for one that follows a step back to
// back (an engine's host work for it has no earlier GPU step to hide
// behind, sim/host_work.hpp), even at t = 0.
constexpr Time kNeverStepped = std::numeric_limits<Time>::min();

// How long a stage free since `free_at` sat idle before a step at `start`:
// from t = 0 (at least 1 ns) before its first step.
Time idle_before(Time free_at, Time start) {
  return free_at == kNeverStepped ? std::max<Time>(1, start) : start - std::min(start, free_at);
}
}  // namespace

VirtualClock::VirtualClock(const std::vector<Pricing>& replicas, std::shared_ptr<KvTransferModel> transfers,
                           std::int32_t first_replica)
    : transfers_(std::move(transfers)), first_replica_(first_replica) {
  lanes_.reserve(replicas.size());
  for (std::size_t i = 0; i < replicas.size(); ++i) {
    if (!replicas[i].cost) {
      throw UsageError("simulator: replica " + std::to_string(first_replica + static_cast<std::int32_t>(i)) +
                       " has no cost model");
    }
    if (replicas[i].stages < 1) throw UsageError("simulator: pipeline stages must be at least 1");
    Lane lane;
    lane.cost = replicas[i].cost;
    lane.stages = replicas[i].stages;
    lane.acceptance = replicas[i].acceptance;
    lane.tiers = replicas[i].tiers;
    lane.power = replicas[i].power;
    lane.stage_gpus = std::max(1, replicas[i].stage_gpus);
    lane.energy_known = lane.power.known && lane.cost->splits_steps();
    lane.stage_free_at.assign(static_cast<std::size_t>(lane.stages), kNeverStepped);
    lanes_.push_back(std::move(lane));
  }
}

// W x ns = 1e-3 uJ. The ops' parts never exceed the busy time (the stage
// time adds overhead to them); a part beyond it is held to it.
void VirtualClock::StageEnergy::add(const Lane& lane, const StepMix& mix, Time busy_ns) {
  if (!lane.energy_known) return;
  const double busy = static_cast<double>(busy_ns);
  const double compute = std::min(mix.compute_ns, busy);
  const double memory = std::min(mix.memory_ns, busy - compute);
  const double rest = busy - compute - memory;
  const PowerDesc& p = lane.power;
  uj += lane.stage_gpus * (compute * p.compute_w + memory * p.memory_w + rest * p.idle_w) * 1e-3;
  baseline_uj += lane.stage_gpus * busy * p.idle_w * 1e-3;
}

void VirtualClock::StageEnergy::write(const Lane& lane, StepResult& result) const {
  result.energy_uj = lane.energy_known ? std::llround(uj) : -1;
  result.idle_baseline_uj = lane.energy_known ? std::llround(baseline_uj) : 0;
}

void VirtualClock::build_shape(const StepPlan& plan) {
  shape_.seqs.clear();
  for (const ScheduledSeq& s : plan.seqs) {
    SeqShape seq;
    seq.new_tokens = s.num_new;
    seq.context_tokens = s.num_computed;
    seq.samples = s.samples;
    seq.lookahead = s.num_lookahead;
    shape_.seqs.push_back(seq);
  }
}

StepTiming VirtualClock::run_step(std::int32_t index, const StepPlan& plan, const Replica&, Time now,
                                  StepResult& result) {
  Lane& lane = lanes_[static_cast<std::size_t>(index)];
  const std::int32_t replica = first_replica_ + index;
  if (lane.acceptance) {
    // Every step (a replay's log is consumed step by step), in plan order.
    result.accepted.assign(plan.seqs.size(), 0);
    lane.acceptance->draw(replica, plan, result.accepted);
  }
  build_shape(plan);
  const std::int64_t copies = static_cast<std::int64_t>(plan.swap_in.size() + plan.swap_out.size());
  const Time swap = copies > 0 ? lane.cost->swap_time(copies) : 0;
  // Prefix blocks loaded back from a tier below HBM: before the first
  // stage's compute, or beside it with load overlap.
  const Time load = lane.tiers && !plan.tier_loads.empty() ? lane.tiers->load_time(plan.tier_loads) : 0;
  StepInput input{&plan, &shape_, replica, 0};
  StepMix mix;
  if (lane.energy_known) input.mix = &mix;
  StageEnergy energy;
  Time t = now;
  for (std::int32_t s = 0; s < lane.stages; ++s) {
    input.stage = s;
    Time& free_at = lane.stage_free_at[static_cast<std::size_t>(s)];
    const Time start = std::max(t, free_at);
    input.idle_ns = idle_before(free_at, start);
    mix = StepMix{};
    Time compute = lane.cost->stage_time(input);
    if (s == 0 && load > 0) {
      const Time with_load = lane.tiers->step_time(compute, load);
      tier_load_stall_ += with_load - compute;
      compute = with_load;
    }
    const Time duration = std::max<Time>(1, swap + compute);
    if (duration > std::numeric_limits<Time>::max() - start)
      throw Error("replica " + std::to_string(replica) + ": simulated time runs past the clock's range (about 292 years)"
                  "; check the trace's arrival times and the cost model's step times");
    free_at = start + duration;
    t = start + duration;
    energy.add(lane, mix, duration);
  }
  energy.write(lane, result);
  return StepTiming{lane.stage_free_at[0], t};
}

StepTiming VirtualClock::run_lockstep(std::span<const std::int32_t> members, std::span<const StepPlan* const> plans,
                                      std::span<StepResult* const> results, Time now) {
  std::int64_t group_tokens = 0;
  for (const StepPlan* plan : plans) {
    if (!plan) continue;
    for (const ScheduledSeq& s : plan->seqs) group_tokens += std::max<std::int32_t>(s.num_new, 0);
  }
  Time step = 1;
  // Each member's own busy time and its split; a member waits idle for the
  // slowest (and one without a plan runs a dummy batch, counted idle).
  lockstep_busy_.assign(members.size(), StepMix{});
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (!plans[i]) continue;
    const StepPlan& plan = *plans[i];
    Lane& lane = lanes_[static_cast<std::size_t>(members[i])];
    build_shape(plan);
    const std::int64_t copies = static_cast<std::int64_t>(plan.swap_in.size() + plan.swap_out.size());
    const Time swap = copies > 0 ? lane.cost->swap_time(copies) : 0;
    const Time load = lane.tiers && !plan.tier_loads.empty() ? lane.tiers->load_time(plan.tier_loads) : 0;
    StepInput input{&plan, &shape_, first_replica_ + members[i], 0};
    input.idle_ns = idle_before(lane.stage_free_at[0], now);
    input.group_tokens = group_tokens;
    if (lane.energy_known) input.mix = &lockstep_busy_[i];
    Time compute = lane.cost->stage_time(input);
    if (load > 0) {
      const Time with_load = lane.tiers->step_time(compute, load);
      tier_load_stall_ += with_load - compute;
      compute = with_load;
    }
    step = std::max(step, swap + compute);
  }
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (!plans[i] || i >= results.size() || !results[i]) continue;
    const Lane& lane = lanes_[static_cast<std::size_t>(members[i])];
    StageEnergy energy;
    energy.add(lane, lockstep_busy_[i], step);  // the wait for the slowest at idle draw
    energy.write(lane, *results[i]);
  }
  if (step > std::numeric_limits<Time>::max() - now)
    throw Error("simulated time runs past the clock's range (about 292 years); check the trace's arrival times");
  for (const std::int32_t m : members) lanes_[static_cast<std::size_t>(m)].stage_free_at[0] = now + step;
  return StepTiming{now + step, now + step};
}

TransferTiming VirtualClock::kv_transfer(const InboundTransfer& transfer) {
  if (!transfers_) throw Error("simulator: a KV transfer, but the cluster has no transfer model (no prefill/decode pools)");
  return transfers_->price(transfer);
}

}  // namespace twin
