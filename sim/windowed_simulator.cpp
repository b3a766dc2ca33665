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
#include "sim/rank_group.hpp"
#include "sim/record_wire.hpp"
#include "sim/replica_pricing.hpp"
#include "sim/thread_team.hpp"
#include "sim/virtual_clock.hpp"

namespace twin {
namespace {

// The requests routed to one replica that its loop has not taken in yet.
class RoutedQueue final : public RequestSource {
 public:
  void push(Request request) { queue_.push_back(std::move(request)); }
  bool empty() const { return queue_.empty(); }
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
  o.router = "round_robin";  // a loop over one replica: the router upstream decides
  o.seed = options.seed;
  o.record_steps = options.record_steps;
  o.record_steps_every = options.record_steps_every;
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
  std::int32_t num_replicas = 0;
  RankGroup* ranks = nullptr;  // null or one rank: every replica is here
  int rank = 0, num_ranks = 1;
  // This rank's replicas (replica i is on rank i mod num_ranks), in order.
  std::vector<std::unique_ptr<Unit>> units;
  std::vector<std::int32_t> local_of;  // per replica: its index in units, or -1
  std::unique_ptr<ThreadTeam> team;
  // Per team member: the lowest replica whose loop threw, and what it threw.
  std::vector<std::pair<std::int32_t, std::exception_ptr>> errors;
  std::vector<const Timed<RequestRecord>*> request_scratch;
  std::vector<const Timed<StepRecord>*> step_scratch;
  std::function<bool()> stop;  // set_stop's hook; empty: never

  // Runs fn on every replica, each on its team member's thread; rethrows
  // what the lowest failing replica threw, so the error does not depend on
  // the thread count either.
  void on_every_replica(const std::function<void(Unit&)>& fn) {
    const std::pair<std::int32_t, std::exception_ptr> first = try_every_replica(fn);
    if (first.second) std::rethrow_exception(first.second);
  }

  // The same, returning the lowest failing replica's error (-1, null: none).
  std::pair<std::int32_t, std::exception_ptr> try_every_replica(const std::function<void(Unit&)>& fn) {
    const int members = team->size();
    for (auto& e : errors) e = {-1, nullptr};
    team->run([&](int w) {
      for (std::size_t i = static_cast<std::size_t>(w); i < units.size(); i += static_cast<std::size_t>(members)) {
        try {
          fn(*units[i]);
        } catch (...) {
          errors[static_cast<std::size_t>(w)] = {units[i]->replica.index(), std::current_exception()};
          return;
        }
      }
    });
    std::pair<std::int32_t, std::exception_ptr> first{-1, nullptr};
    for (const auto& e : errors) {
      if (e.second && (!first.second || e.first < first.first)) first = e;
    }
    return first;
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
                                     const std::function<std::vector<SimReplicaSpec>()>& more_specs, RankGroup* ranks)
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
  s.num_replicas = static_cast<std::int32_t>(replicas.size());
  if (ranks && ranks->size() > 1) {
    s.ranks = ranks;
    s.rank = ranks->rank();
    s.num_ranks = ranks->size();
    if (s.num_ranks > s.num_replicas) {
      throw UsageError("simulator: " + std::to_string(s.num_ranks) + " MPI ranks for " +
                       std::to_string(s.num_replicas) + " replicas: give at most one rank per replica");
    }
    for (const SimReplicaSpec& spec : replicas) {
      if (!spec.config.kv.tiers.empty()) {
        throw UsageError("simulator: KV tiers are not reported across MPI ranks yet; run them in one process");
      }
    }
  }
  std::vector<std::int32_t> mine;  // this rank's replicas
  for (std::int32_t i = s.rank; i < s.num_replicas; i += s.num_ranks) mine.push_back(i);
  const int members = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(jobs), mine.size()));
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
  s.local_of.assign(static_cast<std::size_t>(s.num_replicas), -1);
  s.units.reserve(mine.size());
  for (std::size_t k = 0; k < mine.size(); ++k) {
    const auto i = static_cast<std::size_t>(mine[k]);
    const SimReplicaSpec& spec = copies[k % static_cast<std::size_t>(members)][i];
    s.local_of[i] = static_cast<std::int32_t>(k);
    s.units.push_back(std::make_unique<Unit>(spec, mine[k], s.options));
  }
  s.team = std::make_unique<ThreadTeam>(members);
  s.errors.resize(static_cast<std::size_t>(members));
}

WindowedSimulator::~WindowedSimulator() = default;

std::int32_t WindowedSimulator::num_replicas() const { return state_->num_replicas; }
const Replica& WindowedSimulator::replica(std::int32_t index) const {
  const std::int32_t local = state_->local_of.at(static_cast<std::size_t>(index));
  if (local < 0) {
    throw Error("simulator: replica " + std::to_string(index) + " runs on another MPI rank");
  }
  return state_->units[static_cast<std::size_t>(local)]->replica;
}

void WindowedSimulator::set_stop(std::function<bool()> stop) { state_->stop = std::move(stop); }

Time WindowedSimulator::tier_load_stall() const {
  Time total = 0;
  for (const auto& unit : state_->units) total += unit->clock.tier_load_stall();
  return total;
}

namespace {

// One rank's part of a refresh's exchange, read back on every rank.
struct RankPart {
  std::int32_t error_replica = -1;
  std::string error;
};

void put_error(WireWriter& w, const std::pair<std::int32_t, std::exception_ptr>& failed) {
  w.put<std::int32_t>(failed.second ? failed.first : -1);
  if (!failed.second) return;
  try {
    std::rethrow_exception(failed.second);
  } catch (const std::exception& e) {
    w.put_string(e.what());
  } catch (...) {
    w.put_string("unknown error");
  }
}

template <class Record>
void put_timed(WireWriter& w, const std::vector<Timed<Record>>& records) {
  w.put<std::uint64_t>(records.size());
  for (const Timed<Record>& t : records) {
    w.put(t.at);
    w.put_record(t.record);
  }
}

template <class Record>
void get_timed(WireReader& r, std::vector<Timed<Record>>& out) {
  const auto n = r.get<std::uint64_t>();
  out.resize(static_cast<std::size_t>(n));
  for (Timed<Record>& t : out) {
    t.at = r.get<Time>();
    r.get_record(t.record);
  }
}

// Per replica at its end: end time, steps, events, unserved, busy time,
// step tally (what each rank sends rank 0 at the end of an MPI run).
struct End {
  Time end_time = 0;
  std::int64_t steps = 0, events = 0, unserved = 0, interrupted = 0;
  Time busy = 0;
  StepTally tally;
};

End end_of(const Unit& u) {
  return {u.stats.end_time,   u.stats.steps,      u.stats.events,       u.stats.unserved,
          u.stats.interrupted, u.loop.busy_ns(0), u.stats.step_tally};
}

}  // namespace

// One call of run(): the router with its snapshot, the period's arrivals
// and, across ranks, what the ranks exchanged. Each refresh catches the
// replicas up (here, or across ranks), then routes the period's arrivals
// (one routing for both).
struct WindowedSimulator::Run {
  State& s;
  RequestSource& source;
  RecordSink& sink;
  const std::int32_t n;
  const bool spread;  // replicas on several MPI ranks
  Router router;
  RouterSnapshot snapshot;
  std::vector<ReplicaFigures> loads;
  const bool wants_prefix;
  SimStats stats;
  // Across ranks: each replica's records of the period, by replica.
  std::vector<std::vector<Timed<RequestRecord>>> remote_requests;
  std::vector<std::vector<Timed<StepRecord>>> remote_steps;
  RankPart worst;                         // the lowest failing replica's error, across ranks
  std::vector<Request> window;            // the period's arrivals
  std::vector<std::int32_t> window_hits;  // per arrival, per replica
  Request next;
  bool have_next = false;
  Time last_arrival = 0;
  bool stopping = false;  // a stop: nothing more is routed
  Time at = 0;            // the last refresh

  Run(State& state, RequestSource& source_, RecordSink& sink_)
      : s(state),
        source(source_),
        sink(sink_),
        n(state.num_replicas),
        spread(state.ranks != nullptr),
        router(state.options.router, state.options.seed),
        loads(static_cast<std::size_t>(n)),
        wants_prefix(router.reads_cached_prefix()),
        remote_requests(spread ? static_cast<std::size_t>(n) : 0),
        remote_steps(spread ? static_cast<std::size_t>(n) : 0) {}

  void route_arrivals();
  void catch_up_here(Time period, bool stop_here);
  void catch_up_across_ranks(Time period, bool stop_here);
  void read_window(Time period);
  void route_window();
  void drain_here();
  void drain_across_ranks();
  bool every_rank_idle(const std::pair<std::int32_t, std::exception_ptr>& failed);
  bool any_rank_stops(bool stop_here);
  void end_replicas();
  void total(const std::vector<End>& ends);
  // The ranks' exchange.
  void put_local(WireWriter& w, const std::pair<std::int32_t, std::exception_ptr>& failed);
  void get_records(WireReader& r, int from);
  void throw_worst() const;
  void flush_remote();
};

SimStats WindowedSimulator::run(RequestSource& source, RecordSink& sink) {
  Run r(*state_, source, sink);
  r.route_arrivals();
  r.drain_here();
  r.drain_across_ranks();
  r.end_replicas();
  if (r.s.options.progress) r.s.options.progress(r.stats.end_time, r.stats.arrivals);
  return r.stats;
}

// Refresh by refresh, until the source ends or a stop.
void WindowedSimulator::Run::route_arrivals() {
  have_next = source.next(next);
  std::int64_t refreshes = 0;
  constexpr std::int64_t kProgressEvery = 64;
  while (have_next && !stopping) {
    check_arrival_order(next, last_arrival);
    // The refresh the next arrival is routed at; every replica catches up to it.
    const Time period = next.arrival / s.refresh;
    at = period * s.refresh;
    const bool stop_here = s.stop && s.stop();  // this rank's answer, once per refresh
    if (spread) {
      catch_up_across_ranks(period, stop_here);
    } else {
      catch_up_here(period, stop_here);
    }
    if (stopping) break;  // the period's arrivals never arrive
    snapshot.refresh(loads);
    route_window();
    if (s.options.progress && (++refreshes % kProgressEvery) == 0) s.options.progress(at, stats.arrivals);
  }
}

// One process: the replicas catch up to `at`, their records go to the
// sink and their figures and prefix hits are read directly.
void WindowedSimulator::Run::catch_up_here(Time period, bool stop_here) {
  s.on_every_replica([t = at](Unit& u) { u.loop.advance_through(t - 1); });
  s.flush(sink);
  std::int64_t in_flight = 0;
  for (std::int32_t i = 0; i < n; ++i) {
    const Unit& u = *s.units[static_cast<std::size_t>(i)];
    loads[static_cast<std::size_t>(i)] = load_of(u.replica);
    in_flight += u.loop.in_flight();
  }
  stats.max_in_flight = std::max(stats.max_in_flight, in_flight);
  if (stop_here) {  // as across ranks: the replicas caught up, the period's arrivals never arrive
    stopping = true;
    return;
  }
  read_window(period);
  window_hits.assign(wants_prefix ? window.size() * static_cast<std::size_t>(n) : 0, 0);
  if (!wants_prefix) return;
  for (std::size_t k = 0; k < window.size(); ++k) {
    for (std::int32_t i = 0; i < n; ++i) {
      window_hits[k * static_cast<std::size_t>(n) + static_cast<std::size_t>(i)] =
          s.units[static_cast<std::size_t>(i)]->replica.cached_prefix_tokens(window[k]);
    }
  }
}

// Across ranks: the replicas catch up on their ranks, and every rank sends
// every other its stop answer, its replicas' figures, their prefix hits
// for the period's arrivals and their records (rank 0 hands them to the
// sink).
void WindowedSimulator::Run::catch_up_across_ranks(Time period, bool stop_here) {
  const auto failed = s.try_every_replica([t = at](Unit& u) { u.loop.advance_through(t - 1); });
  read_window(period);  // every rank reads the same trace
  WireWriter w;
  w.put<std::uint8_t>(stop_here ? 1 : 0);
  for (const auto& unit : s.units) {
    const ReplicaFigures l = load_of(unit->replica);
    w.put(l);
    w.put<std::int64_t>(unit->loop.in_flight());
  }
  if (wants_prefix) {
    for (const Request& r : window) {
      for (const auto& unit : s.units) w.put<std::int32_t>(unit->replica.cached_prefix_tokens(r));
    }
  }
  put_local(w, failed);
  const std::vector<std::string> parts = s.ranks->all_gather(w.bytes());
  std::int64_t in_flight = 0;
  window_hits.assign(wants_prefix ? window.size() * static_cast<std::size_t>(n) : 0, 0);
  for (int from = 0; from < s.num_ranks; ++from) {
    WireReader r(parts.at(static_cast<std::size_t>(from)));
    if (r.get<std::uint8_t>() != 0) stopping = true;  // any rank's stop stops all
    for (std::int32_t i = from; i < n; i += s.num_ranks) {
      loads[static_cast<std::size_t>(i)] = r.get<ReplicaFigures>();
      in_flight += r.get<std::int64_t>();
    }
    if (wants_prefix) {
      for (std::size_t k = 0; k < window.size(); ++k) {
        for (std::int32_t i = from; i < n; i += s.num_ranks) {
          window_hits[k * static_cast<std::size_t>(n) + static_cast<std::size_t>(i)] = r.get<std::int32_t>();
        }
      }
    }
    get_records(r, from);
    if (!r.done()) throw Error("rank exchange: rank " + std::to_string(from) + "'s message is longer than expected");
  }
  throw_worst();
  flush_remote();
  stats.max_in_flight = std::max(stats.max_in_flight, in_flight);
}

// The arrivals before the next refresh (`period`'s), in trace order.
void WindowedSimulator::Run::read_window(Time period) {
  window.clear();
  while (have_next && next.arrival / s.refresh == period) {
    last_arrival = next.arrival;
    window.push_back(std::move(next));
    next = Request{};
    have_next = source.next(next);
    if (have_next) check_arrival_order(next, last_arrival);
  }
}

// Routes every arrival of the period from what was seen at the refresh;
// a replica on another rank gets its arrivals there.
void WindowedSimulator::Run::route_window() {
  for (std::size_t k = 0; k < window.size(); ++k) {
    Request& request = window[k];
    if (wants_prefix) {
      snapshot.set_prefix_hits(std::span<const std::int32_t>(window_hits).subspan(k * static_cast<std::size_t>(n),
                                                                                   static_cast<std::size_t>(n)));
    }
    const std::int32_t target = router.pick_from(request, snapshot);
    if (target < 0 || target >= n) {
      throw Error("simulator: the router picked replica " + std::to_string(target) + " of " + std::to_string(n));
    }
    snapshot.sent(target, request);
    ++stats.arrivals;
    const std::int32_t local = s.local_of[static_cast<std::size_t>(target)];
    if (local >= 0) s.units[static_cast<std::size_t>(local)]->routed.push(std::move(request));
  }
}

// No more arrivals: in one process the replicas go on period by period,
// the stop asked at each, until every one is idle (the same records as
// one advance to the end: no request arrives to tie them). Across ranks:
// drain_across_ranks.
void WindowedSimulator::Run::drain_here() {
  if (spread || stopping || stats.arrivals == 0) return;
  auto idle = [this] {
    return std::all_of(s.units.begin(), s.units.end(),
                       [](const auto& u) { return u->loop.in_flight() == 0 && u->routed.empty(); });
  };
  while (!idle()) {
    at += s.refresh;
    if (s.stop && s.stop()) {
      stopping = true;
      break;
    }
    s.on_every_replica([t = at](Unit& u) { u.loop.advance_through(t - 1); });
    s.flush(sink);
  }
}

// Across ranks, as drain_here in one process: period by period until the
// replicas of every rank are idle, the stop asked at each period and any
// rank's stop stopping all. So a signal that comes after the last arrival
// stops the run as in one process, with the same records (before, the
// ranks ran to their end at once and never asked).
void WindowedSimulator::Run::drain_across_ranks() {
  if (!spread || stopping || stats.arrivals == 0) return;
  std::pair<std::int32_t, std::exception_ptr> failed{-1, nullptr};
  while (!every_rank_idle(failed)) {
    at += s.refresh;
    if (any_rank_stops(s.stop && s.stop())) {
      stopping = true;
      break;
    }
    failed = s.try_every_replica([t = at](Unit& u) { u.loop.advance_through(t - 1); });
  }
}

// Every rank sends whether its replicas are idle, with the records and
// the failure of its last advance; true when all are.
bool WindowedSimulator::Run::every_rank_idle(const std::pair<std::int32_t, std::exception_ptr>& failed) {
  const bool idle = std::all_of(s.units.begin(), s.units.end(),
                                [](const auto& u) { return u->loop.in_flight() == 0 && u->routed.empty(); });
  WireWriter w;
  w.put<std::uint8_t>(idle ? 1 : 0);
  put_local(w, failed);
  const std::vector<std::string> parts = s.ranks->all_gather(w.bytes());
  bool all = true;
  for (int from = 0; from < s.num_ranks; ++from) {
    WireReader r(parts.at(static_cast<std::size_t>(from)));
    if (r.get<std::uint8_t>() == 0) all = false;
    get_records(r, from);
    if (!r.done()) throw Error("rank exchange: rank " + std::to_string(from) + "'s message is longer than expected");
  }
  throw_worst();
  flush_remote();
  return all;
}

// Every rank's stop answer for this period; true when any asks.
bool WindowedSimulator::Run::any_rank_stops(bool stop_here) {
  WireWriter w;
  w.put<std::uint8_t>(stop_here ? 1 : 0);
  const std::vector<std::string> parts = s.ranks->all_gather(w.bytes());
  bool any = false;
  for (const std::string& part : parts) {
    WireReader r(part);
    if (r.get<std::uint8_t>() != 0) any = true;
  }
  return any;
}

// Every replica runs to its end, a stopped one ending what it has in
// flight as "interrupted"; their end figures make the stats.
void WindowedSimulator::Run::end_replicas() {
  if (stopping) {
    for (auto& unit : s.units) unit->clock.set_stop([] { return true; });
  }
  auto to_end = [](Unit& u) {
    u.loop.advance_through(std::numeric_limits<Time>::max());
    u.stats = u.loop.finish();
  };
  std::vector<End> ends(static_cast<std::size_t>(n));
  if (!spread) {
    s.on_every_replica(to_end);
    s.flush(sink);
    for (std::int32_t i = 0; i < n; ++i) ends[static_cast<std::size_t>(i)] = end_of(*s.units[static_cast<std::size_t>(i)]);
  } else {
    const auto failed = s.try_every_replica(to_end);
    WireWriter w;
    for (const auto& unit : s.units) w.put(end_of(*unit));
    put_local(w, failed);
    const std::vector<std::string> parts = s.ranks->all_gather(w.bytes());
    for (int from = 0; from < s.num_ranks; ++from) {
      WireReader r(parts.at(static_cast<std::size_t>(from)));
      for (std::int32_t i = from; i < n; i += s.num_ranks) ends[static_cast<std::size_t>(i)] = r.get<End>();
      get_records(r, from);
    }
    throw_worst();
    flush_remote();
  }
  total(ends);
}

void WindowedSimulator::Run::total(const std::vector<End>& ends) {
  for (const End& e : ends) {
    stats.end_time = std::max(stats.end_time, e.end_time);
    stats.steps += e.steps;
    stats.events += e.events;
    stats.unserved += e.unserved;
    stats.interrupted += e.interrupted;
    stats.step_tally.merge(e.tally);
  }
  stats.stopped = stopping;
  if (s.rank == 0) sink.on_step_tally(stats.step_tally);
  for (const End& e : ends) {
    stats.busy_fraction.push_back(stats.end_time > 0 ? static_cast<double>(e.busy) / static_cast<double>(stats.end_time)
                                                     : 0.0);
  }
}

// Puts this rank's records of the period (and its error) into w.
void WindowedSimulator::Run::put_local(WireWriter& w, const std::pair<std::int32_t, std::exception_ptr>& failed) {
  put_error(w, failed);
  for (auto& unit : s.units) {
    put_timed(w, unit->buffer.requests);
    put_timed(w, unit->buffer.steps);
    unit->buffer.requests.clear();
    unit->buffer.steps.clear();
  }
}

// Reads rank `from`'s records; throw_worst() throws the lowest replica's
// error once all are read.
void WindowedSimulator::Run::get_records(WireReader& r, int from) {
  const auto failed = r.get<std::int32_t>();
  if (failed >= 0) {
    std::string what = r.get_string();
    if (worst.error_replica < 0 || failed < worst.error_replica) worst = {failed, std::move(what)};
  }
  for (std::int32_t i = from; i < n; i += s.num_ranks) {
    get_timed(r, remote_requests[static_cast<std::size_t>(i)]);
    get_timed(r, remote_steps[static_cast<std::size_t>(i)]);
  }
}

void WindowedSimulator::Run::throw_worst() const {
  if (worst.error_replica >= 0) throw Error(worst.error);
}

// Rank 0 hands every replica's records to the sink, in the order one
// process would: replica order, then a stable sort by time.
void WindowedSimulator::Run::flush_remote() {
  if (s.rank != 0) return;
  std::vector<const Timed<RequestRecord>*> requests;
  std::vector<const Timed<StepRecord>*> steps;
  for (std::int32_t i = 0; i < n; ++i) {
    for (const auto& t : remote_requests[static_cast<std::size_t>(i)]) requests.push_back(&t);
    for (const auto& t : remote_steps[static_cast<std::size_t>(i)]) steps.push_back(&t);
  }
  auto by_time = [](const auto* a, const auto* b) { return a->at < b->at; };
  std::stable_sort(requests.begin(), requests.end(), by_time);
  std::stable_sort(steps.begin(), steps.end(), by_time);
  for (const auto* t : requests) sink.on_request(t->record);
  if (s.options.record_steps) {
    for (const auto* t : steps) sink.on_step(t->record);
  }
}

}  // namespace twin
