#pragma once
// The one serving loop. Replicas of the core take requests from a
// RequestSource (through the core's router), plan steps, have them executed,
// complete them and hand their records to a RecordSink; a clock, plugged in,
// says what time it is and what executing a step means:
//   - the simulator's virtual clock prices a step with a cost model and jumps
//     to its end (sim/virtual_clock.hpp);
//   - the engine's wall clock waits for the real time of each instant and runs
//     the step on the model (engine/runtime/wall_clock.hpp).
// As ns-3 runs one model over a virtual-time and a real-time implementation,
// the policy's timeline is this loop's whichever clock drives it, so the
// simulator fed the engine's step times replays the engine's run exactly
// (replay parity) by construction.
//
// The timeline: an arrival goes to the replica the router picks and is queued
// as of its arrival time; a replica plans once every event of an instant has
// been applied, so it sees every arrival due by then; a plan completes when
// the clock says; a replica with work and no plan in flight asks to be woken
// at its next deadline (batch timeout, cancel time, queue deadline). When
// nothing is left to happen, requests still admitted can never be served:
// they end as "aborted" rather than vanish.
//
// A client source (record_stream.hpp: closed-loop clients, sessions) hears
// of every request that ends as it ends, and its next request is due when it
// says: one arrival event waits for it, brought forward when an end makes a
// request due earlier, so a request that ends frees its client's slot at the
// same instant. Other sources are read one arrival ahead, in trace order.
//
// Disaggregation (disaggregation.hpp), when some replica has a pool role:
// an arrival goes to the prefill pool's router or the decode pool's as the
// mode says; a prefill replica's hand-off goes to the decode replica the
// decode router picks (or, under `conditional`, the one the decision was
// made for); the decode replica reserves blocks before each planning, and
// the clock prices each transfer it starts. A clock that cannot price
// transfers (the engine's wall clock) refuses a disaggregated cluster.
//
// The loop is a template on the clock so the simulator's hot path pays no
// call through an interface per event.
#include <algorithm>
#include <concepts>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "engine/core/disaggregation.hpp"
#include "engine/core/event_queue.hpp"
#include "engine/core/record_stream.hpp"
#include "engine/core/records.hpp"
#include "engine/core/replica.hpp"
#include "engine/core/request.hpp"
#include "engine/core/router.hpp"
#include "engine/core/step_plan.hpp"

namespace twin {

// When a plan started at some instant lets its replica plan again (its first
// pipeline stage is free) and when its tokens exist.
struct StepTiming {
  Time next_plan_at = 0;
  Time done = 0;  // later than the plan's start
};

// What a clock that can run a disaggregated cluster adds: when a transfer
// that may start now is done, and its bytes.
template <class C>
concept TransferClock = requires(C& clock, const InboundTransfer& transfer) {
  { clock.kv_transfer(transfer) } -> std::same_as<TransferTiming>;
};

// What a clock that can run lockstep groups adds (ServingOptions::lockstep):
// prices one step of a group's replicas started together at t, `plans[i]`
// being replica members[i]'s plan (null: it has none and runs a dummy
// batch); every member is busy until the timing's next_plan_at.
// `results[i]` is member i's result slot (the clock may price its energy).
template <class C>
concept LockstepClock = requires(C& clock, std::span<const std::int32_t> members,
                                 std::span<const StepPlan* const> plans, std::span<StepResult* const> results,
                                 Time t) {
  { clock.run_lockstep(members, plans, results, t) } -> std::same_as<StepTiming>;
};

// What the loop asks of a clock.
template <class C>
concept ServingClock = requires(C& clock, const C& const_clock, Request& request, const Replica& replica,
                                const StepPlan& plan, StepResult& result, const RequestRecord& record,
                                std::int32_t index, Time t) {
  // True once the run should stop (the engine's Ctrl-C; sticky): no plan
  // starts after it, and once none is in flight the requests admitted end
  // as "interrupted" and arrivals not yet due are never taken in.
  { clock.stop_requested() } -> std::same_as<bool>;
  // Returns when the clock has reached t (true), or early when a stop is
  // asked for (false).
  { clock.wait_until(t) } -> std::same_as<bool>;
  // The clock's present, given the loop's present instant t.
  { const_clock.read(t) } -> std::same_as<Time>;
  // A request the router gave `replica`, just before it is added.
  { clock.admit(request, replica) };
  // Executes (or prices) replica `index`'s plan, started at t; an executor
  // fills `result` (sampled tokens), a cost model leaves it empty.
  { clock.run_step(index, plan, replica, t, result) } -> std::same_as<StepTiming>;
  // A request ended (finished, aborted, rejected), before its record reaches the sink.
  { clock.on_ended(record) };
};

// What a clock adds to serve a live source (ServingLoop::run_live): a wait
// that news from the source may end early.
template <class C>
concept LiveClock = requires(C& clock, Time t) {
  // Returns true once the clock has reached t (kNoTime: never), false as
  // soon as the live source may have news (a request, a cancel, its close)
  // or a stop is asked for.
  { clock.wait_for_input(t) } -> std::same_as<bool>;
};

// A clock that sees each step once it has completed (a live front end
// streams the step's tokens then), before the records of the requests the
// step ended reach the sink.
template <class C>
concept StepObserver = requires(C& clock, std::int32_t index, const StepPlan& plan, const StepResult& result,
                                const Replica& replica) {
  { clock.on_completed(index, plan, result, replica) };
};

// The loop's disaggregation settings (disaggregation.hpp); used only when
// some replica's role is not `mixed`.
struct DisaggOptions {
  DisaggMode mode = DisaggMode::always;
  std::int32_t conditional_threshold = 0;  // tokens
  std::string prefill_router = "round_robin";
  std::string decode_router = "round_robin";
};

struct ServingOptions {
  std::string router = "round_robin";  // a registered routing policy (policy_list.hpp)
  DisaggOptions disagg;
  // Lockstep groups, per replica (-1: none; empty: no replica is in one):
  // vLLM's MoE data-parallel ranks under expert parallelism. A group's
  // replicas start a step together once all of them are free, each
  // planning its own batch; while any has work the others take the step
  // too (a dummy batch), and the clock prices the group's step as one.
  std::vector<std::int32_t> lockstep;
  std::uint64_t seed = 0;
  bool record_steps = false;  // pass StepRecords to the sink
  std::uint64_t record_steps_every = 1;  // of them, those keeps_step() keeps (records.hpp)
  // Called now and then (every few thousand events) with the loop's time and
  // the number of arrivals so far.
  std::function<void(Time now, std::int64_t arrivals)> progress;
};

struct ServingStats {
  Time end_time = 0;               // the loop's last instant
  std::int64_t arrivals = 0;       // requests taken in (routed and added)
  std::int64_t steps = 0;          // plans executed, all replicas
  std::int64_t events = 0;
  std::int64_t max_in_flight = 0;  // requests admitted and not ended, peak over the run
  std::int64_t unserved = 0;       // left when nothing more could happen (aborted)
  bool stopped = false;            // the clock asked to stop
  std::int64_t interrupted = 0;    // requests in flight then, ended as "interrupted"
  std::int64_t handoffs = 0;       // requests handed from a prefill to a decode replica
  std::int64_t transfers = 0;      // KV transfers completed
  std::vector<double> busy_fraction;  // per replica: first stage busy time / end time
  StepTally step_tally;               // every step, all replicas (also given to the sink)
};

// Throws twin::Error when `request` arrives before `previous` (the arrival
// of the request read before it; 0 for the first): a source must give
// requests in arrival order (a trace reader settles a trace's own disorder).
void check_arrival_order(const Request& request, Time previous);

template <ServingClock Clock>
class ServingLoop {
 public:
  // The replicas outlive the loop; their record buffers and step recording
  // are the loop's while it runs.
  ServingLoop(std::span<Replica> replicas, Clock& clock, ServingOptions options)
      : replicas_(replicas), clock_(clock), options_(std::move(options)), router_(options_.router, options_.seed) {
    if (replicas_.empty()) throw UsageError("serving loop: no replicas");
    lanes_.resize(replicas_.size());
    for (std::size_t i = 0; i < replicas_.size(); ++i) {
      Replica& replica = replicas_[i];
      replica.set_record_steps(options_.record_steps, options_.record_steps_every);
      replica_ptrs_.push_back(&replica);
      const auto slots = static_cast<std::size_t>(std::max(1, replica.config().max_plans_in_flight));
      lanes_[i].plans.resize(slots);
      lanes_[i].results.resize(slots);
      lanes_[i].slot_used.assign(slots, 0);
    }
    is_dirty_.assign(replicas_.size(), 0);
    events_.reserve(4 * replicas_.size() + 16);
    set_up_pools();
    set_up_lockstep();
  }

  // Serves every request of the source, then returns. Call once.
  ServingStats run(RequestSource& source, RecordSink& sink) {
    begin(source, sink);
    advance_through(std::numeric_limits<Time>::max());
    return finish();
  }

  // Serves a live source (a network front end) until it is closed and every
  // request it gave has ended, or a stop. Arrivals come at the times the
  // source stamps them, never before the loop's present instant; a cancel
  // aborts its request ("cancelled") at the clock's present. Call once,
  // instead of run().
  ServingStats run_live(LiveRequestSource& source, RecordSink& sink)
    requires LiveClock<Clock>
  {
    live_ = &source;
    begin(source, sink);
    while (!stats_.stopped) {
      poll_live();
      if (clock_.stop_requested() && plans_in_flight_ == 0) {
        interrupt();
        break;
      }
      if (events_.empty()) {
        if (source.closed()) break;
        clock_.wait_for_input(kNoTime);
        continue;
      }
      // News ends the wait early: it is taken in before the next event. A
      // stop lets the plans in flight complete first.
      const Time next = events_.top().time;
      if (next > now_ && !clock_.wait_for_input(next) && !(clock_.stop_requested() && plans_in_flight_ > 0)) continue;
      advance_through(next);
    }
    return finish();
  }

  // The same run in windows, for a loop over replicas that advance apart
  // between router refreshes (sim/windowed_simulator.hpp): begin(), then
  // advance_through(t) for rising t, each applying every event up to and
  // including time t, then finish(). A source that ran dry is asked again at
  // each advance (its owner adds the requests routed since).
  void begin(RequestSource& source, RecordSink& sink) {
    sink_ = &sink;
    source_ = &source;
    client_ = dynamic_cast<ClientSource*>(&source);
  }

  void advance_through(Time last) {
    if (client_) {
      arm_client();
    } else if (!arrival_pending_) {
      pull_arrival();
    }
    constexpr std::int64_t kProgressEvery = 1 << 14;
    while (!events_.empty() && events_.top().time <= last) {
      if (clock_.stop_requested() && plans_in_flight_ == 0) {
        interrupt();
        break;
      }
      // A stop asked for during the wait is seen at the top; plans still in
      // flight complete first (none starts after a stop).
      if (events_.top().time > now_ && !clock_.wait_until(events_.top().time) && plans_in_flight_ == 0) continue;
      const Event e = events_.pop();
      now_ = e.time;
      ++stats_.events;
      if (options_.progress && (stats_.events % kProgressEvery) == 0) options_.progress(now_, stats_.arrivals);
      switch (e.kind) {
        case EventKind::arrival:
          if (client_) {
            take_client_arrival(e.time);
          } else {
            take_arrival();
          }
          break;
        case EventKind::plan_done: {
          Lane& lane = lanes_[e.replica];
          replicas_[e.replica].complete(lane.plans[e.slot], lane.results[e.slot], now_);
          if constexpr (StepObserver<Clock>) {
            clock_.on_completed(e.replica, lane.plans[e.slot], lane.results[e.slot], replicas_[e.replica]);
          }
          lane.slot_used[e.slot] = 0;
          --plans_in_flight_;
          drain(e.replica);
          mark(e.replica);
          break;
        }
        case EventKind::stage_free: {
          Lane& lane = lanes_[e.replica];
          if (lane.stage_free_event_at == e.time) lane.stage_free_event_at = kNoTime;
          mark(e.replica);
          break;
        }
        case EventKind::wakeup: {
          Lane& lane = lanes_[e.replica];
          if (lane.wakeup_at == e.time) lane.wakeup_at = kNoTime;
          mark(e.replica);
          break;
        }
        case EventKind::transfer_done:
          finish_transfer(e.slot);
          break;
        case EventKind::cancel:
          cancel_front();
          break;
      }
      if (events_.empty() || events_.top().time != now_) schedule_dirty();
    }
  }

  // Ends the run once nothing is left to happen.
  ServingStats finish() {
    finishing_ = true;  // a client's answer to these ends would never be taken
    // A stop that emptied the queue (no arrival left to come, no plan
    // started after it) ends the run as a stop, not as work left unserved.
    if (!stats_.stopped && plans_in_flight_ == 0 && clock_.stop_requested()) interrupt();
    // Nothing left to happen, yet requests remain: the policy can never serve
    // them (it would otherwise have planned or asked for a wakeup).
    if (!stats_.stopped) stats_.unserved = end_all("aborted");
    stats_.end_time = now_;
    for (const Lane& lane : lanes_) {
      stats_.busy_fraction.push_back(now_ > 0 ? static_cast<double>(lane.busy_ns) / static_cast<double>(now_) : 0.0);
    }
    for (const Replica& replica : replicas_) stats_.step_tally.merge(replica.step_tally());
    sink_->on_step_tally(stats_.step_tally);
    return stats_;
  }

  // The loop's present instant, requests admitted and not ended, and
  // replica i's first-stage busy time so far.
  Time now() const { return now_; }
  std::int64_t in_flight() const { return in_flight_; }
  Time busy_ns(std::int32_t index) const { return lanes_[static_cast<std::size_t>(index)].busy_ns; }

 private:
  // A replica's plans in flight (by slot) and its timing.
  struct Lane {
    std::vector<StepPlan> plans;       // recycled: no allocation per step
    std::vector<StepResult> results;
    std::vector<std::uint8_t> slot_used;
    Time next_plan_at = 0;             // its first pipeline stage is free
    Time wakeup_at = kNoTime;          // a pending wakeup event, if any
    Time stage_free_event_at = kNoTime;
    Time busy_ns = 0;                  // first stage busy time
  };

  void pull_arrival() {
    if (!source_->next(next_)) return;
    // A live request stamped while the loop was busy arrives no earlier than
    // the loop's present (an instant already applied cannot change).
    if (live_) next_.arrival = std::max({next_.arrival, now_, last_arrival_});
    check_arrival_order(next_, last_arrival_);
    last_arrival_ = next_.arrival;
    events_.push(next_.arrival, EventKind::arrival);
    arrival_pending_ = true;
  }

  // ---- live sources ------------------------------------------------------

  // The source's news: its next request (one arrival waits in the event
  // queue at a time) and its cancels, each an event at the clock's present.
  void poll_live() {
    if (!arrival_pending_) pull_arrival();
    RequestId id = 0;
    while (live_->next_cancel(id)) {
      cancels_.push_back(id);
      events_.push(std::max(now_, clock_.read(now_)), EventKind::cancel);
    }
  }

  // Cancel events pop in the order they were pushed (their times never
  // decrease), so the front id is this event's. An id that has ended
  // already is a no-op.
  void cancel_front() {
    const RequestId id = cancels_.front();
    cancels_.pop_front();
    for (std::size_t i = 0; i < replicas_.size(); ++i) {
      const auto index = static_cast<std::int32_t>(i);
      replicas_[i].abort(id, now_, "cancelled");
      drain(index);
      mark(index);
    }
  }

  void take_arrival() {
    arrival_pending_ = false;
    const std::int32_t target = admit_next();
    pull_arrival();
    mark(target);
  }

  // ---- client sources ----------------------------------------------------

  // One arrival event waits for the client's next request: at its due time,
  // or earlier once an end brings it forward (the later event then finds
  // client_due_ changed and does nothing).
  void arm_client() {
    if (finishing_) return;
    const Time due = client_->next_due();
    if (due == kNoTime) return;
    if (due < now_) {
      throw Error("request source: its next request is due at " + std::to_string(due) +
                  " ns, before the serving loop's present (" + std::to_string(now_) + " ns)");
    }
    if (client_due_ != kNoTime && client_due_ <= due) return;
    client_due_ = due;
    events_.push(due, EventKind::arrival);
  }

  void take_client_arrival(Time at) {
    if (at != client_due_) return;
    client_due_ = kNoTime;
    if (client_->next_due() != now_) {
      arm_client();
      return;
    }
    if (!client_->next(next_)) throw Error("request source: no request at the time it said one was due");
    check_arrival_order(next_, last_arrival_);
    last_arrival_ = next_.arrival;
    const std::int32_t target = admit_next();
    arm_client();
    mark(target);
  }

  // Routes next_ to a replica and adds it; returns the replica.
  std::int32_t admit_next() {
    ++stats_.arrivals;
    const std::int32_t target = disagg_ ? route_to_pool() : router_.pick(next_, replica_ptrs_);
    if (target < 0 || target >= static_cast<std::int32_t>(replicas_.size())) {
      throw Error("serving loop: the router picked replica " + std::to_string(target) + " of " +
                  std::to_string(replicas_.size()));
    }
    Replica& replica = replicas_[target];
    clock_.admit(next_, replica);
    replica.add(std::move(next_), now_);
    next_ = Request{};
    ++in_flight_;
    stats_.max_in_flight = std::max(stats_.max_in_flight, in_flight_);
    drain(target);  // rejected at once
    return target;
  }

  // Records go out as they appear; buffers trade places with the replica's.
  void drain(std::int32_t index) {
    Replica& replica = replicas_[index];
    replica.take_finished(finished_);
    for (const RequestRecord& record : finished_) {
      --in_flight_;
      if (disagg_) release_prefill_side(record.id);
      clock_.on_ended(record);
      sink_->on_request(record);
      if (client_) client_->on_ended(record, now_);
    }
    if (client_ && !finished_.empty()) arm_client();
    if (options_.record_steps) {
      replica.take_steps(steps_);
      for (const StepRecord& step : steps_) sink_->on_step(step);
    }
    if (disagg_ && replica.config().role == ReplicaRole::prefill) hand_off(index);
  }

  // Plans as long as the replica's first stage is free and it may have
  // another plan in flight. With pipeline stages the clock delays a plan
  // behind a stage still busy with an earlier one: pipeline bubbles.
  void try_schedule(std::int32_t index) {
    if (!options_.lockstep.empty() && options_.lockstep[static_cast<std::size_t>(index)] >= 0) {
      try_schedule_group(options_.lockstep[static_cast<std::size_t>(index)]);
      return;
    }
    Lane& lane = lanes_[index];
    Replica& replica = replicas_[index];
    // Transfers first: blocks freed since the last planning go to the KV
    // waiting to come in before new local admissions.
    if (disagg_ && replica.config().role == ReplicaRole::decode) start_transfers(index);
    while (lane.next_plan_at <= now_ && replica.can_plan()) {
      if (clock_.stop_requested()) return;
      const std::int32_t slot = free_slot(lane);
      if (slot < 0) break;
      StepPlan& plan = lane.plans[slot];
      replica.plan_into(plan, now_);
      drain(index);  // a plan may abort cancelled requests
      if (plan.empty()) break;
      lane.slot_used[slot] = 1;
      ++plans_in_flight_;
      ++stats_.steps;
      StepResult& result = lane.results[slot];
      const StepTiming timing = clock_.run_step(index, plan, replica, now_, result);
      lane.busy_ns += timing.next_plan_at - now_;
      lane.next_plan_at = timing.next_plan_at;
      events_.push(timing.done, EventKind::plan_done, index, slot);
      if (timing.next_plan_at < timing.done && lane.stage_free_event_at != timing.next_plan_at) {
        lane.stage_free_event_at = timing.next_plan_at;
        events_.push(timing.next_plan_at, EventKind::stage_free, index);
      }
    }
    // A plan may have freed blocks (requests cancelled at its boundary).
    if (disagg_ && replica.config().role == ReplicaRole::decode) start_transfers(index);
    arm_wakeup(index);
  }

  // An idle replica with work asks to be woken at its next deadline.
  void arm_wakeup(std::int32_t index) {
    Lane& lane = lanes_[index];
    const Replica& replica = replicas_[index];
    if (replica.plans_in_flight() == 0 && replica.has_work()) {
      const std::optional<Time> wake = replica.next_wakeup();
      if (wake && *wake > now_ && (lane.wakeup_at == kNoTime || *wake < lane.wakeup_at)) {
        lane.wakeup_at = *wake;
        events_.push(*wake, EventKind::wakeup, index);
      }
    }
  }

  // ---- lockstep groups ---------------------------------------------------

  void set_up_lockstep() {
    if (options_.lockstep.empty()) return;
    if (options_.lockstep.size() != replicas_.size()) {
      throw UsageError("serving loop: " + std::to_string(options_.lockstep.size()) + " lockstep entries for " +
                       std::to_string(replicas_.size()) + " replicas");
    }
    if constexpr (!LockstepClock<Clock>) {
      throw UsageError("serving loop: this clock cannot run replicas in lockstep (data-parallel MoE ranks)");
    }
    for (std::size_t i = 0; i < replicas_.size(); ++i) {
      const std::int32_t group = options_.lockstep[i];
      if (group < 0) continue;
      if (replicas_[i].config().max_plans_in_flight != 1 || replicas_[i].config().role != ReplicaRole::mixed) {
        throw UsageError("serving loop: a lockstep replica runs one plan at a time (no pipeline stages) and no pool role");
      }
      if (static_cast<std::size_t>(group) >= groups_.size()) groups_.resize(static_cast<std::size_t>(group) + 1);
      groups_[static_cast<std::size_t>(group)].push_back(static_cast<std::int32_t>(i));
    }
  }

  // Plans one step of every member once all of them are free; a member
  // without a plan takes the step as a dummy batch. Members plan in replica
  // order, each with its own scheduler.
  void try_schedule_group(std::int32_t group) {
    const std::vector<std::int32_t>& members = groups_[static_cast<std::size_t>(group)];
    for (const std::int32_t m : members) {
      if (lanes_[m].next_plan_at > now_ || replicas_[m].plans_in_flight() > 0) return;
    }
    if (clock_.stop_requested()) return;
    group_plans_.clear();
    bool any = false;
    for (const std::int32_t m : members) {
      StepPlan& plan = lanes_[m].plans[0];
      replicas_[m].plan_into(plan, now_);
      drain(m);  // a plan may abort cancelled requests
      group_plans_.push_back(plan.empty() ? nullptr : &plan);
      any = any || !plan.empty();
    }
    if (!any) {
      for (const std::int32_t m : members) arm_wakeup(m);
      return;
    }
    StepTiming timing{};
    if constexpr (LockstepClock<Clock>) {
      group_results_.clear();
      for (const std::int32_t m : members) group_results_.push_back(&lanes_[m].results[0]);
      timing = clock_.run_lockstep(members, group_plans_, group_results_, now_);
    }
    for (std::size_t i = 0; i < members.size(); ++i) {
      const std::int32_t m = members[i];
      Lane& lane = lanes_[m];
      lane.busy_ns += timing.next_plan_at - now_;
      lane.next_plan_at = timing.next_plan_at;
      if (!group_plans_[i]) continue;
      lane.slot_used[0] = 1;
      ++plans_in_flight_;
      ++stats_.steps;
      events_.push(timing.done, EventKind::plan_done, m, 0);
    }
  }

  static std::int32_t free_slot(const Lane& lane) {
    for (std::size_t i = 0; i < lane.slot_used.size(); ++i) {
      if (!lane.slot_used[i]) return static_cast<std::int32_t>(i);
    }
    return -1;
  }

  void mark(std::int32_t index) {
    if (!is_dirty_[index]) {
      is_dirty_[index] = 1;
      dirty_.push_back(index);
    }
  }

  // Plans for the replicas touched at `now_`, in replica order, once every
  // event of the instant has been applied.
  // Planning may touch other replicas (a hand-off, a prefill replica's
  // blocks let go): they plan in a further round at the same instant.
  void schedule_dirty() {
    while (!dirty_.empty()) {
      if (dirty_.size() > 1) std::sort(dirty_.begin(), dirty_.end());
      scheduling_.swap(dirty_);
      for (const std::int32_t index : scheduling_) {
        is_dirty_[index] = 0;
        try_schedule(index);
      }
      scheduling_.clear();
    }
  }

  // Ends every request admitted and not ended, on every replica; returns how many.
  std::int64_t end_all(const std::string& reason) {
    std::int64_t ended = 0;
    for (std::size_t i = 0; i < replicas_.size(); ++i) {
      if (!replicas_[i].has_work()) continue;
      ended += replicas_[i].abort_all(now_, reason);
      drain(static_cast<std::int32_t>(i));
    }
    return ended;
  }

  // Stop taking requests in (those not yet due never arrived) and end what
  // is in flight with a reason the records keep.
  void interrupt() {
    now_ = std::max(now_, clock_.read(now_));
    stats_.interrupted = end_all("interrupted");
    stats_.stopped = true;
  }

  // ---- disaggregation ----------------------------------------------------

  // A hand-off between the pools: waiting for the decode replica's blocks,
  // then its transfer in flight (an entry of transfers_).
  struct Pending {
    std::int32_t prefill = -1;
    bool transferring = false;
  };
  struct Transfer {
    InboundTransfer transfer;
    std::int64_t bytes = 0;
  };

  void set_up_pools() {
    std::int32_t mixed = 0;
    for (std::size_t i = 0; i < replicas_.size(); ++i) {
      switch (replicas_[i].config().role) {
        case ReplicaRole::mixed: ++mixed; break;
        case ReplicaRole::prefill: prefill_pool_.push_back(static_cast<std::int32_t>(i)); break;
        case ReplicaRole::decode: decode_pool_.push_back(static_cast<std::int32_t>(i)); break;
      }
    }
    if (prefill_pool_.empty() && decode_pool_.empty()) return;
    if constexpr (!TransferClock<Clock>) {
      throw UsageError("serving loop: this clock cannot price KV transfers, so it cannot run prefill and decode pools");
    }
    if (mixed > 0) {
      throw UsageError("serving loop: a disaggregated cluster has prefill and decode replicas only, but " +
                       std::to_string(mixed) + " replicas have role 'mixed'");
    }
    if (decode_pool_.empty()) throw UsageError("serving loop: prefill replicas but no decode replica");
    if (prefill_pool_.empty() && options_.disagg.mode != DisaggMode::never) {
      throw UsageError("serving loop: decode replicas but no prefill replica (disaggregation mode '" +
                       std::string(disagg_mode_name(options_.disagg.mode)) + "')");
    }
    disagg_ = true;
    for (const std::int32_t i : prefill_pool_) prefill_ptrs_.push_back(&replicas_[i]);
    for (const std::int32_t i : decode_pool_) decode_ptrs_.push_back(&replicas_[i]);
    // Each pool's router draws from its own stream of the seed.
    prefill_router_ = Router(options_.disagg.prefill_router, options_.seed ^ 0x50524546494C4CULL);
    decode_router_ = Router(options_.disagg.decode_router, options_.seed ^ 0x4445434F4445ULL);
  }

  std::int32_t pick_decode(const Request& request) {
    return decode_pool_[static_cast<std::size_t>(decode_router_.pick(request, decode_ptrs_))];
  }

  // Where an arrival goes under disaggregation.
  std::int32_t route_to_pool() {
    const DisaggOptions& o = options_.disagg;
    if (o.mode == DisaggMode::never) return pick_decode(next_);
    if (o.mode == DisaggMode::conditional) {
      const std::int32_t decode = pick_decode(next_);
      const std::int32_t uncached = next_.prompt_len - replicas_[decode].cached_prefix_tokens(next_);
      if (uncached <= o.conditional_threshold) return decode;
      decode_for_.emplace(next_.id, decode);  // its KV goes where the decision was made
    }
    return prefill_pool_[static_cast<std::size_t>(prefill_router_.pick(next_, prefill_ptrs_))];
  }

  // A prefill replica's requests whose prefill is done go to the decode pool.
  void hand_off(std::int32_t prefill) {
    replicas_[prefill].take_handoffs(handoffs_);
    for (Handoff& h : handoffs_) {
      ++stats_.handoffs;
      std::int32_t decode = -1;
      if (const auto it = decode_for_.find(h.request.id); it != decode_for_.end()) {
        decode = it->second;
        decode_for_.erase(it);
      } else {
        decode = pick_decode(h.request);
      }
      const RequestId id = h.request.id;
      pending_.emplace(id, Pending{prefill, false});
      replicas_[decode].accept_handoff(std::move(h), now_);
      drain(decode);  // rejected at once: the prefill side lets go
      mark(decode);
    }
    handoffs_.clear();
  }

  // A request ended on a decode replica: if its transfer never started, the
  // prefill replica still holds its KV and lets it go now.
  void release_prefill_side(RequestId id) {
    const auto it = pending_.find(id);
    if (it == pending_.end() || it->second.transferring) return;
    replicas_[it->second.prefill].release_handoff(id);
    mark(it->second.prefill);
    pending_.erase(it);
  }

  void start_transfers(std::int32_t decode) {
    replicas_[decode].start_inbound(now_, starts_);
    for (const InboundTransfer& t : starts_) {
      if constexpr (TransferClock<Clock>) {
        const TransferTiming timing = clock_.kv_transfer(t);
        if (timing.done < now_) throw Error("serving loop: a KV transfer ends before it starts");
        std::int32_t slot;
        if (!free_transfers_.empty()) {
          slot = free_transfers_.back();
          free_transfers_.pop_back();
        } else {
          slot = static_cast<std::int32_t>(transfers_.size());
          transfers_.emplace_back();
        }
        transfers_[static_cast<std::size_t>(slot)] = Transfer{t, timing.bytes};
        pending_.at(t.id).transferring = true;
        events_.push(timing.done, EventKind::transfer_done, decode, slot);
      }
    }
  }

  void finish_transfer(std::int32_t slot) {
    const Transfer& t = transfers_[static_cast<std::size_t>(slot)];
    const InboundTransfer& in = t.transfer;
    ++stats_.transfers;
    pending_.erase(in.id);
    replicas_[in.from_replica].release_handoff(in.id);
    replicas_[in.to_replica].finish_inbound(in.id, now_, t.bytes);
    mark(in.from_replica);
    mark(in.to_replica);
    free_transfers_.push_back(slot);
  }

  std::span<Replica> replicas_;
  Clock& clock_;
  ServingOptions options_;
  Router router_;
  std::vector<const Replica*> replica_ptrs_;
  std::vector<Lane> lanes_;
  EventQueue events_;
  RequestSource* source_ = nullptr;
  ClientSource* client_ = nullptr;  // source_, when its requests answer ends
  Time client_due_ = kNoTime;       // the client's arrival event waiting, if any
  bool finishing_ = false;
  RecordSink* sink_ = nullptr;
  Request next_;  // the arrival in the event queue
  bool arrival_pending_ = false;  // next_ holds it
  LiveRequestSource* live_ = nullptr;  // run_live's source
  std::deque<RequestId> cancels_;      // one per cancel event, in event order
  Time last_arrival_ = 0;
  Time now_ = 0;
  std::int64_t in_flight_ = 0;
  std::int64_t plans_in_flight_ = 0;
  // Replicas touched by events at `now_`: they plan once every event of this
  // instant has been applied (replay parity depends on it).
  std::vector<std::int32_t> dirty_;
  std::vector<std::uint8_t> is_dirty_;
  std::vector<std::int32_t> scheduling_;  // the round schedule_dirty() is planning
  std::vector<RequestRecord> finished_;
  std::vector<StepRecord> steps_;
  ServingStats stats_;

  std::vector<std::vector<std::int32_t>> groups_;  // lockstep groups' members, ascending
  std::vector<const StepPlan*> group_plans_;        // the group step being started, by member
  std::vector<StepResult*> group_results_;          // their result slots, by member

  bool disagg_ = false;
  std::vector<std::int32_t> prefill_pool_, decode_pool_;  // replica indices, ascending
  std::vector<const Replica*> prefill_ptrs_, decode_ptrs_;
  Router prefill_router_{"round_robin", 0};
  Router decode_router_{"round_robin", 0};
  std::unordered_map<RequestId, std::int32_t> decode_for_;  // conditional: the decode replica decided for
  std::unordered_map<RequestId, Pending> pending_;          // handed off, KV not yet on the decode side
  std::vector<Handoff> handoffs_;
  std::vector<InboundTransfer> starts_;
  std::vector<Transfer> transfers_;                         // by event slot
  std::vector<std::int32_t> free_transfers_;
};

}  // namespace twin
