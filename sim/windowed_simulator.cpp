#include "sim/windowed_simulator.hpp"

#include <algorithm>
#include <deque>
#include <exception>
#include <span>
#include <string>
#include <utility>

#include "base/error.hpp"
#include "engine/core/router.hpp"
#include "engine/core/router_snapshot.hpp"
#include "engine/core/serving_loop.hpp"
#include "sim/replica_pricing.hpp"
#include "sim/thread_team.hpp"
#include "sim/virtual_clock.hpp"

namespace twin {
namespace {

// The requests routed to one replica that its loop has not taken in yet.
class RoutedQueue final : public RequestSource {
 public:
  void push(Request request) { queue_.push_back(std::move(request)); }
  bool next(Request& out) override {
    if (queue_.empty()) return false;
    out = std::move(queue_.front());
    queue_.pop_front();
    return true;
  }

 private:
  std::deque<Request> queue_;
};

template <class Record>
struct Timed {
  Time at = 0;  // the loop's instant when the record came out
  Record record;
};

// A replica's records of the current period, kept until the refresh.
class PeriodBuffer final : public RecordSink {
 public:
  const ServingLoop<VirtualClock>* loop = nullptr;
  std::vector<Timed<RequestRecord>> requests;
  std::vector<Timed<StepRecord>> steps;
  void on_request(const RequestRecord& record) override { requests.push_back({loop->now(), record}); }
  void on_step(const StepRecord& step) override { steps.push_back({loop->now(), step}); }
};

ServingOptions unit_options(const SimOptions& options) {
  ServingOptions o;
  o.router = RouterPolicy::round_robin;  // a loop over one replica: the router upstream decides
  o.seed = options.seed;
  o.record_steps = options.record_steps;
  return o;
}

// One replica with its own clock and loop. Never moves: the loop holds
// references into it.
struct Unit {
  Replica replica;
  VirtualClock clock;
  RoutedQueue routed;
  PeriodBuffer buffer;
  ServingLoop<VirtualClock> loop;
  ServingStats stats;  // at the end

  Unit(const SimReplicaSpec& spec, std::int32_t index, const SimOptions& options)
      : replica(spec.config, index),
        clock(pricing_of({spec}), nullptr, index),
        loop(std::span<Replica>(&replica, 1), clock, unit_options(options)) {
    buffer.loop = &loop;
    loop.begin(routed, buffer);
  }
};

// Hands `units`' buffered records to the sink, ordered by (time, replica,
// order within the replica), and empties the buffers.
template <class Record, class Member>
void merge_into(std::vector<std::unique_ptr<Unit>>& units, Member member, std::vector<const Timed<Record>*>& scratch,
                const std::function<void(const Record&)>& emit) {
  scratch.clear();
  for (auto& unit : units) {
    for (const Timed<Record>& t : unit->buffer.*member) scratch.push_back(&t);
  }
  std::stable_sort(scratch.begin(), scratch.end(), [](const Timed<Record>* a, const Timed<Record>* b) { return a->at < b->at; });
  for (const Timed<Record>* t : scratch) emit(t->record);
  for (auto& unit : units) (unit->buffer.*member).clear();
}

}  // namespace

struct WindowedSimulator::State {
  SimOptions options;
  Time refresh;
  std::vector<std::unique_ptr<Unit>> units;
  std::unique_ptr<ThreadTeam> team;
  // Per team member: the lowest replica whose loop threw, and what it threw.
  std::vector<std::pair<std::int32_t, std::exception_ptr>> errors;
  std::vector<const Timed<RequestRecord>*> request_scratch;
  std::vector<const Timed<StepRecord>*> step_scratch;

  // Runs fn on every replica, each on its team member's thread; rethrows
  // what the lowest failing replica threw, so the error does not depend on
  // the thread count either.
  void on_every_replica(const std::function<void(Unit&)>& fn) {
    const int members = team->size();
    for (auto& e : errors) e = {-1, nullptr};
    team->run([&](int w) {
      for (std::size_t i = static_cast<std::size_t>(w); i < units.size(); i += static_cast<std::size_t>(members)) {
        try {
          fn(*units[i]);
        } catch (...) {
          errors[static_cast<std::size_t>(w)] = {static_cast<std::int32_t>(i), std::current_exception()};
          return;
        }
      }
    });
    const std::pair<std::int32_t, std::exception_ptr>* first = nullptr;
    for (const auto& e : errors) {
      if (e.second && (!first || e.first < first->first)) first = &e;
    }
    if (first) std::rethrow_exception(first->second);
  }

  void flush(RecordSink& sink) {
    merge_into<RequestRecord>(units, &PeriodBuffer::requests, request_scratch,
                              [&](const RequestRecord& r) { sink.on_request(r); });
    if (options.record_steps) {
      merge_into<StepRecord>(units, &PeriodBuffer::steps, step_scratch, [&](const StepRecord& s) { sink.on_step(s); });
    }
  }
};

WindowedSimulator::WindowedSimulator(std::vector<SimReplicaSpec> replicas, SimOptions options, Time refresh, int jobs,
                                     const std::function<std::vector<SimReplicaSpec>()>& more_specs)
    : state_(std::make_unique<State>()) {
  if (replicas.empty()) throw UsageError("simulator: the cluster has no replicas");
  if (refresh <= 0) throw UsageError("windowed simulator: the router refresh period must be positive");
  if (jobs < 1 || jobs > ThreadTeam::kMaxSize) {
    throw UsageError("simulator: jobs must be from 1 to " + std::to_string(ThreadTeam::kMaxSize) + ", got " +
                     std::to_string(jobs));
  }
  for (const SimReplicaSpec& spec : replicas) {
    if (spec.config.role != ReplicaRole::mixed) {
      throw UsageError("a router refresh period > 0 (router_refresh_s, --router-refresh-s) is modelled for clusters "
                       "without prefill/decode pools: a hand-off between pools ties two replicas within a period");
    }
  }
  State& s = *state_;
  s.options = std::move(options);
  s.refresh = refresh;
  const int members = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(jobs), replicas.size()));
  std::vector<std::vector<SimReplicaSpec>> copies(static_cast<std::size_t>(members));
  copies[0] = std::move(replicas);
  for (int w = 1; w < members; ++w) {
    if (!more_specs) throw UsageError("windowed simulator: more than one thread needs a copy of the replicas' specs");
    copies[static_cast<std::size_t>(w)] = more_specs();
    if (copies[static_cast<std::size_t>(w)].size() != copies[0].size()) {
      throw Error("windowed simulator: the copy of the cluster for thread " + std::to_string(w) + " has " +
                  std::to_string(copies[static_cast<std::size_t>(w)].size()) + " replicas, not " +
                  std::to_string(copies[0].size()));
    }
  }
  s.units.reserve(copies[0].size());
  for (std::size_t i = 0; i < copies[0].size(); ++i) {
    const SimReplicaSpec& spec = copies[i % static_cast<std::size_t>(members)][i];
    s.units.push_back(std::make_unique<Unit>(spec, static_cast<std::int32_t>(i), s.options));
  }
  s.team = std::make_unique<ThreadTeam>(members);
  s.errors.resize(static_cast<std::size_t>(members));
}

WindowedSimulator::~WindowedSimulator() = default;

std::int32_t WindowedSimulator::num_replicas() const { return static_cast<std::int32_t>(state_->units.size()); }
const Replica& WindowedSimulator::replica(std::int32_t index) const {
  return state_->units.at(static_cast<std::size_t>(index))->replica;
}

Time WindowedSimulator::tier_load_stall() const {
  Time total = 0;
  for (const auto& unit : state_->units) total += unit->clock.tier_load_stall();
  return total;
}

SimStats WindowedSimulator::run(RequestSource& source, RecordSink& sink) {
  State& s = *state_;
  const auto n = static_cast<std::int32_t>(s.units.size());
  Router router(s.options.router, s.options.seed);
  RouterSnapshot snapshot;
  std::vector<ReplicaLoad> loads(static_cast<std::size_t>(n));
  std::vector<std::int32_t> hits(static_cast<std::size_t>(n));
  const bool wants_prefix = router.policy() == RouterPolicy::prefix_affinity;
  SimStats stats;

  Request next;
  bool have_next = source.next(next);
  Time last_arrival = 0;
  std::int64_t refreshes = 0;
  constexpr std::int64_t kProgressEvery = 64;
  while (have_next) {
    check_arrival_order(next, last_arrival);
    // The refresh the next arrival is routed at; every replica catches up to it.
    const Time period = next.arrival / s.refresh;
    const Time at = period * s.refresh;
    s.on_every_replica([at](Unit& u) { u.loop.advance_through(at - 1); });
    s.flush(sink);
    std::int64_t in_flight = 0;
    for (std::int32_t i = 0; i < n; ++i) {
      const Unit& u = *s.units[static_cast<std::size_t>(i)];
      loads[static_cast<std::size_t>(i)] = load_of(u.replica);
      in_flight += u.loop.in_flight();
    }
    stats.max_in_flight = std::max(stats.max_in_flight, in_flight);
    snapshot.refresh(loads);
    // Route every arrival before the next refresh from what was seen at this one.
    while (have_next && next.arrival / s.refresh == period) {
      if (wants_prefix) {
        for (std::int32_t i = 0; i < n; ++i) {
          hits[static_cast<std::size_t>(i)] = s.units[static_cast<std::size_t>(i)]->replica.cached_prefix_tokens(next);
        }
        snapshot.set_prefix_hits(hits);
      }
      const std::int32_t target = router.pick_from(next, snapshot);
      if (target < 0 || target >= n) {
        throw Error("simulator: the router picked replica " + std::to_string(target) + " of " + std::to_string(n));
      }
      snapshot.sent(target, next);
      ++stats.arrivals;
      last_arrival = next.arrival;
      s.units[static_cast<std::size_t>(target)]->routed.push(std::move(next));
      next = Request{};
      have_next = source.next(next);
      if (have_next) check_arrival_order(next, last_arrival);
    }
    if (s.options.progress && (++refreshes % kProgressEvery) == 0) s.options.progress(at, stats.arrivals);
  }
  // No more arrivals: every replica runs to its end.
  s.on_every_replica([](Unit& u) {
    u.loop.advance_through(std::numeric_limits<Time>::max());
    u.stats = u.loop.finish();
  });
  s.flush(sink);

  for (const auto& unit : s.units) {
    stats.end_time = std::max(stats.end_time, unit->stats.end_time);
    stats.steps += unit->stats.steps;
    stats.events += unit->stats.events;
    stats.unserved += unit->stats.unserved;
  }
  for (const auto& unit : s.units) {
    const Time end = stats.end_time;
    stats.busy_fraction.push_back(end > 0 ? static_cast<double>(unit->loop.busy_ns(0)) / static_cast<double>(end) : 0.0);
  }
  if (s.options.progress) s.options.progress(stats.end_time, stats.arrivals);
  return stats;
}

}  // namespace twin
