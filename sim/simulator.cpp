#include "sim/simulator.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "base/error.hpp"

namespace twin {
namespace {

struct ReplicaRun {
  Replica replica;
  std::shared_ptr<CostModel> cost;
  std::int32_t stages = 1;
  std::vector<Time> stage_free_at;   // when each pipeline stage can start another plan
  std::vector<StepPlan> slots;       // plans in flight, by slot
  std::vector<std::uint8_t> slot_used;
  Time wakeup_at = kNoTime;          // a pending wakeup event, if any
  Time stage_free_event_at = kNoTime;
  Time busy_ns = 0;                  // first stage busy time

  ReplicaRun(const SimReplicaSpec& spec, std::int32_t index)
      : replica(spec.config, index), cost(spec.cost_model), stages(spec.pipeline_stages) {
    stage_free_at.assign(stages, 0);
    slots.resize(std::max(1, spec.config.max_plans_in_flight));
    slot_used.assign(slots.size(), 0);
  }

  std::int32_t free_slot() const {
    for (std::size_t i = 0; i < slot_used.size(); ++i) {
      if (!slot_used[i]) return static_cast<std::int32_t>(i);
    }
    return -1;
  }
};

}  // namespace

struct Simulator::State {
  SimOptions options;
  std::vector<ReplicaRun> replicas;
  std::vector<const Replica*> replica_ptrs;
  Router router;
  EventQueue events;
  BatchShape shape;  // reused for every plan
  Time now = 0;
  std::int64_t in_flight = 0;
  // Replicas touched by events at `now`; they plan once every event of this
  // instant has been applied, as the engine plans after taking in every
  // arrival due by then (replay parity depends on it).
  std::vector<std::int32_t> dirty;
  std::vector<std::uint8_t> is_dirty;
  SimStats stats;
  RecordSink* sink = nullptr;

  State(std::vector<SimReplicaSpec>& specs, SimOptions opts)
      : options(std::move(opts)), router(options.router, options.seed) {
    if (specs.empty()) throw UsageError("simulator: the cluster has no replicas");
    replicas.reserve(specs.size());
    for (std::size_t i = 0; i < specs.size(); ++i) {
      if (!specs[i].cost_model) throw UsageError("simulator: replica " + std::to_string(i) + " has no cost model");
      if (specs[i].pipeline_stages < 1) throw UsageError("simulator: pipeline stages must be at least 1");
      replicas.emplace_back(specs[i], static_cast<std::int32_t>(i));
      replicas.back().replica.set_record_steps(options.record_steps);
    }
    for (auto& r : replicas) replica_ptrs.push_back(&r.replica);
    is_dirty.assign(replicas.size(), 0);
    events.reserve(4 * replicas.size() + 16);
  }

  // Record buffers trade places with the replicas' (no allocation per step).
  std::vector<RequestRecord> finished_buffer;
  std::vector<StepRecord> steps_buffer;

  void drain(ReplicaRun& run) {
    run.replica.take_finished(finished_buffer);
    for (const RequestRecord& rec : finished_buffer) {
      --in_flight;
      sink->on_request(rec);
    }
    if (options.record_steps) {
      run.replica.take_steps(steps_buffer);
      for (const StepRecord& step : steps_buffer) sink->on_step(step);
    }
  }

  void build_shape(const StepPlan& plan) {
    shape.seqs.clear();
    for (const ScheduledSeq& s : plan.seqs) {
      SeqShape seq;
      seq.new_tokens = s.num_new;
      seq.context_tokens = s.num_computed;
      seq.samples = s.samples;
      shape.seqs.push_back(seq);
    }
  }

  // Plans as long as the first stage is free and the replica may have another
  // plan in flight. Each plan runs through the stages in order; a stage busy
  // with an earlier plan delays it, which is where pipeline bubbles come from.
  void try_schedule(std::int32_t index) {
    ReplicaRun& run = replicas[index];
    while (run.stage_free_at[0] <= now && run.replica.can_plan()) {
      const std::int32_t slot = run.free_slot();
      if (slot < 0) break;
      StepPlan& plan = run.slots[slot];
      run.replica.plan_into(plan, now);
      drain(run);  // a plan may abort cancelled requests
      if (plan.empty()) break;
      run.slot_used[slot] = 1;
      ++stats.steps;
      build_shape(plan);
      const std::int64_t copies = static_cast<std::int64_t>(plan.swap_in.size() + plan.swap_out.size());
      const Time swap = copies > 0 ? run.cost->swap_time(copies) : 0;
      StepInput input{&plan, &shape, index, 0};
      Time t = now;
      for (std::int32_t s = 0; s < run.stages; ++s) {
        input.stage = s;
        const Time start = std::max(t, run.stage_free_at[s]);
        input.idle_ns = start - run.stage_free_at[s];
        const Time duration = std::max<Time>(1, swap + run.cost->stage_time(input));
        if (duration > std::numeric_limits<Time>::max() - start)
          throw Error("replica " + std::to_string(index) + ": simulated time runs past the clock's range (about 292 years)"
                      "; check the trace's arrival times and the cost model's step times");
        if (s == 0) run.busy_ns += duration;
        run.stage_free_at[s] = start + duration;
        t = start + duration;
      }
      events.push(t, EventKind::plan_done, index, slot);
      if (run.stages > 1 && run.stage_free_at[0] < t && run.stage_free_event_at != run.stage_free_at[0]) {
        run.stage_free_event_at = run.stage_free_at[0];
        events.push(run.stage_free_at[0], EventKind::stage_free, index);
      }
    }
    if (run.replica.plans_in_flight() == 0 && run.replica.has_work()) {
      const std::optional<Time> wake = run.replica.next_wakeup();
      if (wake && *wake > now && (run.wakeup_at == kNoTime || *wake < run.wakeup_at)) {
        run.wakeup_at = *wake;
        events.push(*wake, EventKind::wakeup, index);
      }
    }
  }

  void mark(std::int32_t index) {
    if (!is_dirty[index]) {
      is_dirty[index] = 1;
      dirty.push_back(index);
    }
  }

  // Plans for the replicas touched at `now`, in replica order.
  void schedule_dirty() {
    if (dirty.size() > 1) std::sort(dirty.begin(), dirty.end());
    for (std::int32_t index : dirty) {
      is_dirty[index] = 0;
      try_schedule(index);
    }
    dirty.clear();
  }

  bool pull_arrival(RequestSource& source, Request& next, Time& last_arrival) {
    if (!source.next(next)) return false;
    // A trace may step back a little within its reader's tolerance; the clock
    // may not, so such a request arrives at the previous arrival time.
    if (next.arrival < last_arrival) next.arrival = last_arrival;
    last_arrival = next.arrival;
    events.push(next.arrival, EventKind::arrival);
    return true;
  }
};

Simulator::Simulator(std::vector<SimReplicaSpec> replicas, SimOptions options)
    : state_(std::make_unique<State>(replicas, std::move(options))) {}
Simulator::~Simulator() = default;

std::int32_t Simulator::num_replicas() const { return static_cast<std::int32_t>(state_->replicas.size()); }
const Replica& Simulator::replica(std::int32_t index) const { return state_->replicas.at(index).replica; }

SimStats Simulator::run(RequestSource& source, RecordSink& sink) {
  State& s = *state_;
  s.sink = &sink;
  Request next;
  Time last_arrival = 0;
  bool have_next = s.pull_arrival(source, next, last_arrival);
  constexpr std::int64_t kProgressEvery = 1 << 14;

  while (!s.events.empty()) {
    const Event e = s.events.pop();
    s.now = e.time;
    ++s.stats.events;
    if (s.options.progress && (s.stats.events % kProgressEvery) == 0) s.options.progress(s.now, s.stats.arrivals);
    switch (e.kind) {
      case EventKind::arrival: {
        Request req = std::move(next);
        ++s.stats.arrivals;
        const std::int32_t target = s.router.pick(req, s.replica_ptrs);
        if (target < 0 || target >= static_cast<std::int32_t>(s.replicas.size())) {
          throw Error("simulator: the router picked replica " + std::to_string(target) + " of " +
                      std::to_string(s.replicas.size()));
        }
        ReplicaRun& run = s.replicas[target];
        run.replica.add(std::move(req), s.now);
        ++s.in_flight;
        s.stats.max_in_flight = std::max(s.stats.max_in_flight, s.in_flight);
        s.drain(run);  // rejected at once
        have_next = s.pull_arrival(source, next, last_arrival);
        s.mark(target);
        break;
      }
      case EventKind::plan_done: {
        ReplicaRun& run = s.replicas[e.replica];
        run.replica.complete(run.slots[e.slot], StepResult{}, s.now);
        run.slot_used[e.slot] = 0;
        s.drain(run);
        s.mark(e.replica);
        break;
      }
      case EventKind::stage_free: {
        ReplicaRun& run = s.replicas[e.replica];
        if (run.stage_free_event_at == e.time) run.stage_free_event_at = kNoTime;
        s.mark(e.replica);
        break;
      }
      case EventKind::wakeup: {
        ReplicaRun& run = s.replicas[e.replica];
        if (run.wakeup_at == e.time) run.wakeup_at = kNoTime;
        s.mark(e.replica);
        break;
      }
    }
    if (s.events.empty() || s.events.top().time != s.now) s.schedule_dirty();
  }
  (void)have_next;
  s.stats.end_time = s.now;

  // Nothing left to happen, yet requests remain: the policy can never serve
  // them (it would otherwise have planned or asked for a wakeup). End them
  // rather than lose them silently.
  for (ReplicaRun& run : s.replicas) {
    if (!run.replica.has_work()) continue;
    std::vector<RequestId> ids;
    for (const SeqView& seq : run.replica.live_seqs()) ids.push_back(seq.request->id);
    for (RequestId id : ids) run.replica.abort(id, s.now);
    s.stats.unserved += static_cast<std::int64_t>(ids.size());
    s.drain(run);
  }
  for (const ReplicaRun& run : s.replicas) {
    s.stats.busy_fraction.push_back(s.now > 0 ? static_cast<double>(run.busy_ns) / static_cast<double>(s.now) : 0.0);
  }
  return s.stats;
}

}  // namespace twin
