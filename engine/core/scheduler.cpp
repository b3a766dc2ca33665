#include "engine/core/scheduler.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "base/error.hpp"

namespace twin {

namespace {

KvCacheConfig kv_config_for(const ReplicaConfig& config) {
  KvCacheConfig kv = config.kv;
  kv.max_model_len = config.scheduler.max_model_len;  // one source of truth
  return kv;
}

// LPM over a long queue costs a lookup per waiting request per step; SGLang
// falls back to FCFS above this length, and so do we.
constexpr std::size_t kLpmMaxQueue = 128;

}  // namespace

Scheduler::Scheduler(const ReplicaConfig& config, std::int32_t index)
    : config_((validate(config), config)),
      index_(index),
      admission_(admission_policies().make(config.scheduler.admission_reserve, config.scheduler)),
      victim_(victim_policies().make(config.scheduler.victim, config.scheduler)),
      batch_(batch_policies().make(config.scheduler.batching, config.scheduler)),
      batch_mode_(batch_->forms_batches()),
      kv_(kv_config_for(config)),
      token_budget_(effective_token_budget(config.scheduler)),
      block_size_(config.kv.block_size),
      contiguous_(config.kv.contiguous),
      queue_(config.scheduler) {
  config_.kv.max_model_len = config.scheduler.max_model_len;
  in_flight_.resize(static_cast<std::size_t>(config.max_plans_in_flight));
}

// ---- arrivals and endings --------------------------------------------------

std::optional<std::string> Scheduler::rejection_reason(const Request& req) const {
  const auto& sc = config_.scheduler;
  if (req.prompt_len < 1) return "prompt_len " + std::to_string(req.prompt_len) + " must be at least 1";
  if (req.output_len < 1) return "output_len " + std::to_string(req.output_len) + " must be at least 1";
  if (!req.prompt_tokens.empty() && static_cast<std::int64_t>(req.prompt_tokens.size()) != req.prompt_len) {
    return "prompt has " + std::to_string(req.prompt_tokens.size()) + " tokens but prompt_len " +
           std::to_string(req.prompt_len);
  }
  const std::int64_t total = static_cast<std::int64_t>(req.prompt_len) + req.output_len;
  if (total > sc.max_model_len) {
    return "prompt + output = " + std::to_string(total) + " tokens exceeds max_model_len " +
           std::to_string(sc.max_model_len);
  }
  // The KV of the last sampled token is never written: a request holds at
  // most prompt + output - 1 tokens.
  const SeqKv empty;
  const auto max_tokens = static_cast<std::int32_t>(total - 1);
  const std::int32_t need = kv_.blocks_needed(empty, max_tokens);
  if (need > kv_.num_blocks()) {
    return "needs " + std::to_string(need) + " KV blocks, more than the whole cache (" +
           std::to_string(kv_.num_blocks()) + ")";
  }
  // Its largest first chunk (a recompute of everything) must clear the watermark.
  std::int32_t first_chunk = std::min(max_tokens, token_budget_);
  if (sc.long_prefill_token_threshold > 0) first_chunk = std::min(first_chunk, sc.long_prefill_token_threshold);
  const std::int32_t first_need = kv_.blocks_needed(empty, first_chunk);
  if (first_need + kv_.watermark_blocks() > kv_.num_blocks()) {
    return "its first chunk needs " + std::to_string(first_need) + " KV blocks, more than the cache leaves above the " +
           "watermark (" + std::to_string(kv_.num_blocks() - kv_.watermark_blocks()) + ")";
  }
  return std::nullopt;
}

std::optional<std::string> Scheduler::admission_reason(const Request& req) const {
  std::optional<std::string> reason = rejection_reason(req);
  const std::int32_t max_queued = config_.scheduler.max_queued_requests;
  if (!reason && max_queued > 0 && queue_.size() >= static_cast<std::size_t>(max_queued)) reason = "queue full";
  return reason;
}

void Scheduler::add(Request request, Time now) {
  if (id_to_slot_.count(request.id)) {
    throw Error("replica " + std::to_string(index_) + ": request id " + std::to_string(request.id) +
                " is already in flight");
  }
  std::optional<std::string> reason = admission_reason(request);
  if (reason) {
    RequestRecord r;
    r.id = request.id;
    r.replica = index_;
    r.outcome = Outcome::rejected;
    r.reason = std::move(*reason);
    r.arrival = request.arrival;
    r.finish = now;
    r.prompt_tokens = request.prompt_len;
    finished_.push_back(std::move(r));
    return;
  }
  const std::int32_t slot = new_slot();
  Seq& s = seqs_[static_cast<std::size_t>(slot)];
  s.req = std::move(request);
  s.id = s.req.id;
  s.cancel_time = s.req.cancel_time;
  s.prompt_len = s.req.prompt_len;
  s.output_len = s.req.output_len;
  kv_.init_seq(s.req, s.kv);
  s.added_at = now;
  id_to_slot_.emplace(s.id, slot);
  const Time max_wait = config_.scheduler.max_queue_time;
  if (max_wait > 0 && now <= std::numeric_limits<Time>::max() - max_wait) s.queue_deadline = now + max_wait;
  set_deadline(slot);
  enqueue(slot, false, now);
}

std::int32_t Scheduler::new_slot() {
  if (!free_slots_.empty()) {
    const std::int32_t slot = free_slots_.back();
    free_slots_.pop_back();
    return slot;
  }
  seqs_.emplace_back();
  if (config_.role != ReplicaRole::mixed) disagg_.emplace_back();
  return static_cast<std::int32_t>(seqs_.size() - 1);
}

// Keys the request's slot in deadlines_ by the earlier of its cancel time
// and, until it is first scheduled, its queue deadline.
void Scheduler::set_deadline(std::int32_t slot) {
  Seq& s = seqs_[static_cast<std::size_t>(slot)];
  Time t = s.req.cancel_time;
  if (!s.admitted_once && s.queue_deadline != kNoTime) t = t == kNoTime ? s.queue_deadline : std::min(t, s.queue_deadline);
  if (t == s.deadline) return;
  if (s.deadline != kNoTime) deadlines_.erase({s.deadline, slot});
  s.deadline = t;
  if (t != kNoTime) deadlines_.emplace(t, slot);
}

void Scheduler::enqueue(std::int32_t slot, bool at_front, Time now) {
  Seq& s = seqs_[static_cast<std::size_t>(slot)];
  s.state = State::waiting;
  s.queued_at = now;
  s.queue_entry = queue_.push(s.req, slot, at_front, s.num_output);
  if (s.batch_member) ++members_waiting_;
}

void Scheduler::abort(RequestId id, Time now, const std::string& reason) {
  const auto it = id_to_slot_.find(id);
  if (it == id_to_slot_.end()) return;  // already ended: aborting twice is harmless
  if (seqs_[static_cast<std::size_t>(it->second)].state == State::held) {
    release_handoff(id);  // it lives on at the decode side, which records its end
    return;
  }
  end_request(it->second, Outcome::aborted, reason, now, true);
}

std::int64_t Scheduler::abort_all(Time now, const std::string& reason) {
  std::vector<RequestId> ids;
  ids.reserve(id_to_slot_.size());
  for (const auto& [id, slot] : id_to_slot_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());  // id order, whatever the hash map's
  std::int64_t ended = 0;
  for (const RequestId id : ids) {
    if (seqs_[static_cast<std::size_t>(id_to_slot_.at(id))].state != State::held) ++ended;
    abort(id, now, reason);
  }
  return ended;
}

void Scheduler::end_request(std::int32_t slot, Outcome outcome, std::string reason, Time now,
                            bool remove_from_running) {
  Seq& s = seqs_[static_cast<std::size_t>(slot)];
  RequestRecord r;
  r.id = s.id;
  r.replica = index_;
  r.outcome = outcome;
  r.reason = std::move(reason);
  r.arrival = s.req.arrival;
  r.first_token = s.first_token;
  r.first_scheduled = s.first_scheduled;
  r.finish = now;
  r.prompt_tokens = s.prompt_len;
  r.output_tokens = s.num_output;
  r.cached_prompt_tokens = s.cached_prompt_tokens;
  r.preemptions = s.preemptions;
  r.energy_uj = s.energy_uj;
  if (s.num_output > 0) flush_itl(s, 0);
  r.itl = std::move(s.itl);
  if (!disagg_.empty()) {
    const DisaggSeq& d = disagg_[static_cast<std::size_t>(slot)];
    r.prefill_replica = d.from_replica >= 0 ? d.from_replica : (s.first_token != kNoTime ? index_ : -1);
    r.kv_reserved = d.kv_reserved;
    r.kv_arrived = d.kv_arrived;
    r.kv_transfer_bytes = d.kv_bytes;
  }
  finished_.push_back(std::move(r));

  if (s.deadline != kNoTime) deadlines_.erase({s.deadline, slot});
  if (s.batch_member) {
    --members_alive_;
    if (s.state == State::waiting) --members_waiting_;
  }
  switch (s.state) {
    case State::waiting:
      queue_.erase(s.queue_entry);
      break;
    case State::running:
      if (remove_from_running) running_.erase(std::find(running_.begin(), running_.end(), slot));
      break;
    case State::swapped:
      swapped_.erase(std::find(swapped_.begin(), swapped_.end(), slot));
      kv_.free_host(s.kv);
      break;
    case State::inbound:
      inbound_.erase(std::find(inbound_.begin(), inbound_.end(), slot));
      break;
    case State::receiving:  // in flight: the slot waits for finish_inbound()
    case State::held:
    case State::free:
    case State::ended:
      break;
  }
  id_to_slot_.erase(s.id);
  s.state = State::ended;
  // A request in an outstanding plan keeps its blocks (the executor may be
  // writing them) until that plan completes.
  if (!s.in_flight) release_slot(slot);
}

void Scheduler::release_slot(std::int32_t slot) {
  Seq& s = seqs_[static_cast<std::size_t>(slot)];
  kv_.free(s.kv);
  s = Seq{};
  if (!disagg_.empty()) disagg_[static_cast<std::size_t>(slot)] = DisaggSeq{};
  free_slots_.push_back(slot);
}

// ---- planning ---------------------------------------------------------------

StepPlan Scheduler::plan(Time now) {
  StepPlan plan;
  plan_into(plan, now);
  return plan;
}

namespace {

// A plan emptied for reuse: the vectors keep their capacity.
void reset_plan(StepPlan& plan, Time now) {
  plan.step_id = 0;
  plan.start = now;
  plan.seqs.clear();
  plan.preempted.clear();
  plan.aborted.clear();
  plan.swap_out.clear();
  plan.swap_in.clear();
  plan.tier_loads.clear();
  plan.tier_stores.clear();
  plan.tier_copies.clear();
}

// The step's record from its plan. Built for every step: the tally counts
// it whether or not the record is passed on. The vectors keep their
// capacity.
void fill_step_record(StepRecord& rec, const StepPlan& plan, std::int32_t replica, Time now,
                      std::int32_t waiting_at_plan) {
  std::vector<std::int32_t> lookahead = std::move(rec.lookahead), accepted = std::move(rec.accepted);
  std::vector<std::int32_t> loads = std::move(rec.tier_loads), stores = std::move(rec.tier_stores);
  rec = StepRecord{};
  lookahead.clear();
  accepted.clear();
  rec.lookahead = std::move(lookahead);
  rec.accepted = std::move(accepted);
  loads.assign(plan.tier_loads.begin(), plan.tier_loads.end());
  stores.assign(plan.tier_stores.begin(), plan.tier_stores.end());
  rec.tier_loads = std::move(loads);
  rec.tier_stores = std::move(stores);
  rec.step_id = plan.step_id;
  rec.replica = replica;
  rec.start = now;
  rec.batch_size = static_cast<std::int32_t>(plan.seqs.size());
  for (const auto& q : plan.seqs) {
    (q.is_prefill ? rec.num_prefill_seqs : rec.num_decode_seqs) += 1;
    rec.new_tokens += q.num_new;
    rec.context_tokens += q.num_computed;
    rec.proposed_tokens += q.num_lookahead;
  }
  rec.preempted = static_cast<std::int32_t>(plan.preempted.size());
  rec.waiting = waiting_at_plan;
  rec.swapped_out_blocks = static_cast<std::int32_t>(plan.swap_out.size());
  rec.swapped_in_blocks = static_cast<std::int32_t>(plan.swap_in.size());
}

}  // namespace

void Scheduler::plan_into(StepPlan& plan, Time now) {
  reset_plan(plan, now);
  if (!can_plan()) return;
  process_deadlines(now, plan);
  if (batch_mode()) maybe_form_batch(now);

  const auto waiting_at_plan = static_cast<std::int32_t>(queue_.size());
  plan.seqs.reserve(running_.size() + 8);
  budget_left_ = token_budget_;
  building_slots_.clear();
  admit_horizon_ = admit_horizon_for(now);
  observe_for_admission();
  plan_passes(plan, now);
  planned_since_done_ = true;
  for (const ScheduledSeq& q : plan.seqs) last_plan_.decoded = last_plan_.decoded || !q.is_prefill;

  if (plan.empty()) return;
  // Tier moves since the last plan are this step's to pay (an empty plan
  // leaves them for the next).
  if (kv_.take_tier_moves(plan.tier_loads, plan.tier_stores) && kv_.config().record_tier_copies) {
    kv_.take_tier_copies(plan.tier_copies);
  }
  InFlight& entry = open_in_flight(plan);
  fill_step_record(entry.record, plan, index_, now, waiting_at_plan);
}

// The admission policy sees what the previous plan did (SGLang's ratio
// decays per decode step, resets when idle, and is set from the batch after
// a retraction).
void Scheduler::observe_for_admission() {
  AdmissionStep step;
  step.idle = running_.empty();
  step.preempted = last_plan_.preempted;
  step.decoded = last_plan_.decoded;
  if (step.preempted && admission_->running_output_clip() > 0) {
    for (const std::int32_t r : running_) {
      const Seq& q = seqs_[static_cast<std::size_t>(r)];
      step.running_outputs_done += q.known_tokens() - q.prompt_len;
      step.running_outputs_total += q.output_len;
    }
    step.running = static_cast<std::int32_t>(running_.size());
  }
  admission_->observe(step);
  last_plan_ = {};
}

// The planning order is the policy: running, then swapped, then waiting
// (decode_first), or prefills of the running and admissions first; under
// one token budget, planned again where a plan would run nothing.
void Scheduler::plan_passes(StepPlan& plan, Time now) {
  bool replanned_after_preemption = false;
  for (int attempt = 0; attempt < 3; ++attempt) {
    preempted_ = false;
    if (config_.scheduler.decode_first) {
      schedule_running(plan, false);
      if (!preempted_) swap_in_pass(plan);
      if (!preempted_ && swapped_.empty()) admit_pass(plan);
    } else {
      schedule_running(plan, true);
      if (!preempted_ && swapped_.empty()) admit_pass(plan);
      if (plan.seqs.empty()) {
        schedule_running(plan, false);
        if (!preempted_) swap_in_pass(plan);
      }
    }
    if (!plan.seqs.empty()) break;
    if (preempted_ && num_in_flight_ == 0 && !replanned_after_preemption) {
      // A step whose only request preempted itself would leave nothing
      // running and nothing in flight to wake us: plan again, admissions
      // allowed.
      replanned_after_preemption = true;
    } else if (preempted_ || admit_horizon_ >= now) {
      break;
    }
    // Async scheduling: a plan that would run nothing stands for the engine
    // finding its queued plan empty: it plans again, seeing every arrival.
    admit_horizon_ = now;
  }
}

// A free in-flight entry takes the plan's step id and the slots it built;
// those seqs are in flight until the step completes.
Scheduler::InFlight& Scheduler::open_in_flight(StepPlan& plan) {
  InFlight* entry = nullptr;
  for (auto& f : in_flight_) {
    if (!f.active) {
      entry = &f;
      break;
    }
  }
  entry->active = true;
  entry->step_id = plan.step_id = ++next_step_id_;
  entry->slots.swap(building_slots_);
  ++num_in_flight_;
  for (const std::int32_t slot : entry->slots) {
    Seq& s = seqs_[static_cast<std::size_t>(slot)];
    s.scheduled = false;
    s.in_flight = true;
  }
  return *entry;
}

void Scheduler::process_deadlines(Time now, StepPlan& plan) {
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    const std::int32_t slot = deadlines_.begin()->second;
    const Seq& s = seqs_[static_cast<std::size_t>(slot)];
    // A queue deadline strictly before the cancel time (or without one) is a
    // timeout; on a tie the client's cancel wins.
    const bool timed_out = !s.admitted_once && s.queue_deadline != kNoTime && s.queue_deadline <= now &&
                           (s.req.cancel_time == kNoTime || s.queue_deadline < s.req.cancel_time);
    if (timed_out) {
      end_request(slot, Outcome::rejected, "queue timeout", now, true);  // erases the deadline entry
    } else {
      plan.aborted.push_back(s.id);
      end_request(slot, Outcome::aborted, "cancelled", now, true);
    }
  }
}

// The waiting queue as a BatchPolicy reads it.
class Scheduler::Waiting final : public WaitingView {
 public:
  explicit Waiting(const Scheduler& scheduler) : scheduler_(scheduler) {}
  std::size_t size() const override { return scheduler_.queue_.size(); }
  Time oldest_queued_at() const override { return scheduler_.oldest_queued_at(); }

 private:
  const Scheduler& scheduler_;
};

Time Scheduler::oldest_queued_at() const {
  // Called only while fewer than batch_size requests wait: a short scan.
  Time oldest = std::numeric_limits<Time>::max();
  for (const auto& e : queue_.entries()) {
    oldest = std::min(oldest, seqs_[static_cast<std::size_t>(e.slot)].queued_at);
  }
  return oldest;
}

void Scheduler::maybe_form_batch(Time now) {
  if (members_alive_ > 0 || queue_.empty()) return;
  const auto& sc = config_.scheduler;
  if (const std::optional<Time> due = batch_->ready_at(Waiting(*this)); due && now < *due) return;
  std::int32_t taken = 0;
  queue_.for_each([&](std::int32_t slot) {
    seqs_[static_cast<std::size_t>(slot)].batch_member = true;
    return ++taken < sc.batch_size;
  });
  members_alive_ = members_waiting_ = taken;
}

std::int32_t Scheduler::chunk(const Seq& s) const {
  std::int32_t n = s.known_tokens() - s.num_computed;
  const std::int32_t threshold = config_.scheduler.long_prefill_token_threshold;
  if (threshold > 0) n = std::min(n, threshold);
  return std::min(n, budget_left_);
}

bool Scheduler::ensure_kv(Seq& s, std::int32_t total_tokens) {
  if (!s.kv.blocks.empty() &&
      (contiguous_ || total_tokens <= static_cast<std::int32_t>(s.kv.blocks.size()) * block_size_)) {
    return true;  // no block boundary crossed: the common decode step
  }
  return kv_.allocate(s.req, s.kv, 0, total_tokens, false);
}

std::int32_t Scheduler::lookahead_for(const Seq& s, std::int32_t n) const {
  const std::int32_t k = config_.scheduler.num_speculative_tokens;
  if (k == 0 || n != 1 || s.num_computed + 1 != s.known_tokens() || s.num_computed < s.prompt_len) return 0;
  return std::max(0, std::min({k, s.output_len - s.num_output - 1, budget_left_ - n}));
}

void Scheduler::add_to_plan(StepPlan& plan, std::int32_t slot, std::int32_t num_new, std::int32_t lookahead) {
  Seq& s = seqs_[static_cast<std::size_t>(slot)];
  ScheduledSeq q;
  q.id = s.id;
  q.num_computed = s.num_computed;
  q.num_new = num_new;
  q.num_lookahead = lookahead;
  const std::int32_t known_new = num_new - lookahead;
  q.samples = s.num_computed + known_new == s.known_tokens();
  q.is_prefill = !(known_new == 1 && s.num_computed >= s.prompt_len);
  plan.seqs.push_back(q);
  building_slots_.push_back(slot);
  s.scheduled = true;
  budget_left_ -= num_new;
}

void Scheduler::schedule_running(StepPlan& plan, bool prefill_only) {
  for (std::size_t i = 0; i < running_.size() && budget_left_ > 0; ++i) {
    const std::int32_t slot = running_[i];
    Seq& s = seqs_[static_cast<std::size_t>(slot)];
    if (s.in_flight || s.scheduled) continue;
    if (prefill_only && !needs_prefill(s)) continue;
    const std::int32_t n = chunk(s);
    std::int32_t lookahead = lookahead_for(s, n);
    for (;;) {
      if (ensure_kv(s, s.num_computed + n + lookahead)) {
        add_to_plan(plan, slot, n + lookahead, lookahead);
        break;
      }
      // Lookahead is dropped before anyone is preempted to make room for it.
      if (lookahead > 0) {
        lookahead = 0;
        continue;
      }
      const std::size_t victim = pick_victim();
      const std::int32_t victim_slot = running_[victim];
      preempt(plan, victim);
      if (victim <= i) --i;  // wraps to SIZE_MAX at 0; the loop's ++i brings it back
      if (victim_slot == slot) break;
    }
  }
}

// The running list as a VictimPolicy reads it.
class Scheduler::Running final : public RunningView {
 public:
  explicit Running(const Scheduler& scheduler) : scheduler_(scheduler) {}
  std::size_t size() const override { return scheduler_.running_.size(); }
  bool eligible(std::size_t k) const override { return !seq(k).in_flight; }
  const Request& request(std::size_t k) const override { return seq(k).req; }
  std::int32_t num_output(std::size_t k) const override { return seq(k).num_output; }

 private:
  const Seq& seq(std::size_t k) const { return scheduler_.seqs_[static_cast<std::size_t>(scheduler_.running_[k])]; }
  const Scheduler& scheduler_;
};

std::size_t Scheduler::pick_victim() const {
  // Requests in an outstanding plan are never victims; the request being
  // scheduled is not in flight, so a candidate always exists.
  const std::size_t k = victim_->pick(Running(*this));
  if (k >= running_.size() || seqs_[static_cast<std::size_t>(running_[k])].in_flight) {
    throw Error("scheduler: victim policy '" + config_.scheduler.victim + "' picked no eligible request");
  }
  return k;
}

void Scheduler::preempt(StepPlan& plan, std::size_t running_index) {
  const std::int32_t slot = running_[running_index];
  Seq& s = seqs_[static_cast<std::size_t>(slot)];
  if (s.scheduled) {
    // Already scheduled this step (oldest / lowest_priority victims): refund.
    const auto pos = static_cast<std::size_t>(
        std::find(building_slots_.begin(), building_slots_.end(), slot) - building_slots_.begin());
    budget_left_ += plan.seqs[pos].num_new;
    plan.seqs.erase(plan.seqs.begin() + static_cast<std::ptrdiff_t>(pos));
    building_slots_.erase(building_slots_.begin() + static_cast<std::ptrdiff_t>(pos));
    s.scheduled = false;
  }
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(running_index));
  ++s.preemptions;
  preempted_ = true;
  last_plan_.preempted = true;
  plan.preempted.push_back(s.id);
  if (config_.scheduler.preemption == PreemptionMode::swap && kv_.swap_out(s.kv, plan.swap_out)) {
    s.state = State::swapped;
    swapped_.push_back(slot);
    return;
  }
  // Recompute (also the fallback when the host tier is full).
  kv_.free(s.kv);
  s.num_computed = 0;
  enqueue(slot, true, plan.start);
}

void Scheduler::swap_in_pass(StepPlan& plan) {
  const auto max_seqs = static_cast<std::size_t>(config_.scheduler.max_num_seqs);
  while (!swapped_.empty() && running_.size() < max_seqs && budget_left_ > 0) {
    const std::int32_t slot = swapped_.front();
    Seq& s = seqs_[static_cast<std::size_t>(slot)];
    const std::int32_t n = chunk(s);
    std::int32_t lookahead = lookahead_for(s, n);
    if (kv_.blocks_needed(SeqKv{}, s.num_computed + n + lookahead) > kv_.num_free_blocks()) lookahead = 0;
    const std::int32_t total = s.num_computed + n + lookahead;
    if (kv_.blocks_needed(SeqKv{}, total) > kv_.num_free_blocks()) break;
    if (!kv_.swap_in(s.kv, plan.swap_in)) break;
    if (!ensure_kv(s, total)) throw Error("scheduler: swap-in growth failed (internal error)");
    swapped_.pop_front();
    s.state = State::running;
    running_.push_back(slot);
    add_to_plan(plan, slot, n + lookahead, lookahead);
  }
}

bool Scheduler::try_admit(StepPlan& plan, std::int32_t slot, std::int32_t hit_blocks) {
  Seq& s = seqs_[static_cast<std::size_t>(slot)];
  const std::int32_t hits = hit_blocks * block_size_;
  std::int32_t n = s.known_tokens() - hits;
  const std::int32_t threshold = config_.scheduler.long_prefill_token_threshold;
  if (threshold > 0) n = std::min(n, threshold);
  if (!config_.scheduler.enable_chunked_prefill && n > budget_left_) return false;
  n = std::min(n, budget_left_);
  AdmissionCandidate candidate{s.prompt_len, s.output_len, s.known_tokens(), 0};
  if (const std::int32_t clip = admission_->running_output_clip(); clip > 0) {
    for (const std::int32_t r : running_) {
      const Seq& q = seqs_[static_cast<std::size_t>(r)];
      candidate.running_outputs_left += std::clamp(q.output_len - (q.known_tokens() - q.prompt_len), 0, clip);
    }
  }
  const std::int32_t must_fit = admission_->must_fit(candidate);
  if (!kv_.allocate(s.req, s.kv, hit_blocks, hits + n, true, must_fit)) return false;
  queue_.erase(s.queue_entry);
  if (s.batch_member) --members_waiting_;
  s.state = State::running;
  running_.push_back(slot);
  s.num_computed = hits;
  if (!s.admitted_once) {
    s.admitted_once = true;
    s.first_scheduled = plan.start;
    s.cached_prompt_tokens = hits;
    if (!disagg_.empty()) disagg_[static_cast<std::size_t>(slot)].prefill_start = plan.start;
    if (s.queue_deadline != kNoTime) set_deadline(slot);  // scheduled: the queue deadline no longer applies
  }
  add_to_plan(plan, slot, n);
  return true;
}

void Scheduler::admit_pass(StepPlan& plan) {
  if (batch_mode() && members_waiting_ == 0) return;
  const auto max_seqs = static_cast<std::size_t>(config_.scheduler.max_num_seqs);
  // Admission stops at the first request that does not fit (head-of-line, as
  // vLLM): skipping it would starve long prompts.
  const bool fcfs = queue_.order().arrival_order();
  auto visit = [&](std::int32_t slot, std::int32_t hit_blocks) {
    if (running_.size() >= max_seqs || budget_left_ <= 0) return false;
    // Not yet seen by the plan (async scheduling): in FCFS order every later
    // entry arrived later still.
    if (seqs_[static_cast<std::size_t>(slot)].added_at > admit_horizon_) return !fcfs;
    if (batch_mode() && !seqs_[static_cast<std::size_t>(slot)].batch_member) return true;
    if (!try_admit(plan, slot, hit_blocks)) return false;
    return !(batch_mode() && members_waiting_ == 0);
  };
  if (queue_.order().service() == QueueService::cached_prefix && queue_.size() <= kLpmMaxQueue) {
    lpm_order_.clear();
    queue_.for_each([&](std::int32_t slot) {
      const Seq& s = seqs_[static_cast<std::size_t>(slot)];
      lpm_order_.emplace_back(-kv_.lookup(s.req, s.kv, s.known_tokens()), slot);
      return true;
    });
    // Stable: equal hits keep queue (FCFS) order.
    std::stable_sort(lpm_order_.begin(), lpm_order_.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [neg_hits, slot] : lpm_order_) {
      // Admitting the previous request may have evicted some of these hits.
      const Seq& s = seqs_[static_cast<std::size_t>(slot)];
      if (!visit(slot, kv_.lookup(s.req, s.kv, s.known_tokens()))) break;
    }
    return;
  }
  queue_.for_each([&](std::int32_t slot) {
    const Seq& s = seqs_[static_cast<std::size_t>(slot)];
    return visit(slot, kv_.lookup(s.req, s.kv, s.known_tokens()));
  });
}

// ---- completion -------------------------------------------------------------

// One pass over the step's sequences in plan order: each is checked for
// verified lookahead, then ends (aborted in flight, cancelled in the step)
// or advances its computed tokens, samples, and finishes or is handed off.
void Scheduler::complete(const StepPlan& plan, const StepResult& result, Time now) {
  InFlight* entry = in_flight_entry(plan);
  if (entry == nullptr) return;
  const bool eos = config_.scheduler.stop_at_eos && !result.stopped.empty();
  if (eos) {
    stopped_sorted_.assign(result.stopped.begin(), result.stopped.end());
    std::sort(stopped_sorted_.begin(), stopped_sorted_.end());
  }
  const std::int64_t completion = done_base_ + static_cast<std::int64_t>(done_times_.size());
  done_times_.push_back(now);
  planned_since_done_ = false;
  last_done_start_ = plan.start;
  const bool own_blocks = kv_.config().cache_generated_blocks && kv_.config().enable_prefix_caching;
  apportion_energy(plan, *entry, result.energy_uj);
  bool any_ended = false;
  for (std::size_t j = 0; j < plan.seqs.size(); ++j) {
    const std::int32_t slot = entry->slots[j];
    const ScheduledSeq& q = plan.seqs[j];
    Seq& s = seqs_[static_cast<std::size_t>(slot)];
    s.in_flight = false;
    const std::int32_t accepted = q.num_lookahead > 0 ? verified_lookahead(*entry, plan, result, j, s.id) : 0;
    if (s.state == State::ended) {  // aborted while in flight
      release_slot(slot);
      continue;
    }
    if (s.cancel_time != kNoTime && s.cancel_time <= now) {
      // Its cancel time fell inside this step: the step's work for it is
      // dropped (no token counted, nothing published) and it ends here.
      end_request(slot, Outcome::aborted, "cancelled", now, false);
      any_ended = true;
      continue;
    }
    advance_computed(s, q, accepted, own_blocks);
    if (!q.samples) continue;
    record_sample(s, 1 + accepted, completion, now);
    if (s.num_output >= s.output_len ||
        (eos && std::binary_search(stopped_sorted_.begin(), stopped_sorted_.end(), s.id))) {
      end_request(slot, Outcome::finished, "", now, false);
      any_ended = true;
    } else if (config_.role == ReplicaRole::prefill && s.num_output == 1) {
      hand_off(slot);
      any_ended = true;  // leaves the running list
    }
  }
  if (any_ended) {
    std::erase_if(running_, [&](std::int32_t slot) {
      const State st = seqs_[static_cast<std::size_t>(slot)].state;
      return st != State::running;
    });
  }
  close_step(*entry, plan, result, now);
}

// The in-flight entry of the plan; nullptr for an empty plan never put in
// flight. Throws for a step not in flight or whose batch changed.
Scheduler::InFlight* Scheduler::in_flight_entry(const StepPlan& plan) {
  InFlight* entry = nullptr;
  for (auto& f : in_flight_) {
    if (f.active && f.step_id == plan.step_id) {
      entry = &f;
      break;
    }
  }
  if (entry == nullptr) {
    if (plan.empty()) return nullptr;
    throw Error("replica " + std::to_string(index_) + ": complete() of step " + std::to_string(plan.step_id) +
                ", which is not in flight");
  }
  if (entry->slots.size() != plan.seqs.size()) {
    throw Error("replica " + std::to_string(index_) + ": step " + std::to_string(plan.step_id) +
                " came back with a different batch than planned");
  }
  return entry;
}

// The accepted count of sequence j's lookahead, checked, and recorded in
// the step's record (every seq with lookahead, ended or not: a replay
// follows the list).
std::int32_t Scheduler::verified_lookahead(InFlight& entry, const StepPlan& plan, const StepResult& result,
                                           std::size_t j, RequestId id) {
  const ScheduledSeq& q = plan.seqs[j];
  if (j >= result.accepted.size()) {
    throw Error("replica " + std::to_string(index_) + ": step " + std::to_string(plan.step_id) +
                " verified lookahead tokens but its result reports no accepted counts");
  }
  const std::int32_t accepted = result.accepted[j];
  if (accepted < 0 || accepted > q.num_lookahead) {
    throw Error("replica " + std::to_string(index_) + ": step " + std::to_string(plan.step_id) + " request " +
                std::to_string(id) + ": " + std::to_string(accepted) + " tokens accepted of " +
                std::to_string(q.num_lookahead) + " proposed");
  }
  entry.record.accepted_tokens += accepted;
  entry.record.lookahead.push_back(q.num_lookahead);
  entry.record.accepted.push_back(accepted);
  return accepted;
}

// The step's tokens become computed and their full blocks are published.
// The KV of rejected proposals is garbage: only the known tokens and the
// accepted proposals count as computed, and the blocks that held nothing
// else go back to the pool (they are past the prompt, never published).
void Scheduler::advance_computed(Seq& s, const ScheduledSeq& q, std::int32_t accepted, bool own_blocks) {
  const bool in_prompt = s.num_computed < s.prompt_len;
  s.num_computed += q.num_new - q.num_lookahead + accepted;
  if (accepted < q.num_lookahead) kv_.truncate(s.kv, s.num_computed);
  if (in_prompt) {
    kv_.publish(s.req, s.kv, own_blocks ? s.num_computed : std::min(s.num_computed, s.prompt_len));
  } else if (own_blocks && s.num_computed >= (s.kv.num_published + 1) * block_size_) {
    kv_.publish(s.req, s.kv, s.num_computed);  // a generated block just filled
  }
}

// `produced` tokens sampled at completion `completion` (time now): the
// accepted proposals plus the target's own next token, all at `now`, so the
// extra tokens' gaps are 0.
void Scheduler::record_sample(Seq& s, std::int32_t produced, std::int64_t completion, Time now) {
  if (s.num_output == 0) {
    s.first_token = now;
  } else if (produced == 1 && s.last_sample + 1 == completion) {
    ++s.run_gaps;  // the common decode step: no store outside the hot line
  } else {
    flush_itl(s, 1);
    // A request handed off samples here first after its first token.
    s.itl.push_back(now - (s.last_sample == kSampledElsewhere ? s.first_token : done_at(s.last_sample)));
  }
  if (produced > 1) {
    flush_itl(s, static_cast<std::size_t>(produced - 1));
    s.itl.insert(s.itl.end(), static_cast<std::size_t>(produced - 1), Time{0});
  }
  s.num_output += produced;
  s.last_sample = completion;
}

// The step's record is finished, tallied and kept (when recorded); its
// in-flight entry is freed.
void Scheduler::close_step(InFlight& entry, const StepPlan& plan, const StepResult& result, Time now) {
  StepRecord& rec = entry.record;
  rec.duration = now - plan.start;
  rec.kv_blocks_used = kv_.num_used_blocks();
  rec.energy_uj = result.energy_uj;
  step_tally_.add(rec);
  step_tally_.add_energy(result.energy_uj, result.idle_baseline_uj);
  if (record_steps_ && keeps_step(rec.step_id, record_every_)) steps_.push_back(rec);
  entry.active = false;
  entry.slots.clear();  // keeps its capacity for the next plan
  --num_in_flight_;
  if (done_times_.size() >= trim_at_) trim_done_times();
}

// A step's energy shared by its seqs in proportion to the tokens each had
// in it (a prefill chunk of 512 tokens takes 512 shares, a decode one); the
// last seq takes the rounding, so the shares add up to the step's energy.
void Scheduler::apportion_energy(const StepPlan& plan, const InFlight& entry, std::int64_t step_uj) {
  std::int64_t tokens = 0;
  for (const ScheduledSeq& q : plan.seqs) tokens += q.num_new;
  std::int64_t left = step_uj;
  for (std::size_t j = 0; j < plan.seqs.size(); ++j) {
    Seq& s = seqs_[static_cast<std::size_t>(entry.slots[j])];
    if (step_uj < 0 || s.energy_uj < 0) {
      s.energy_uj = -1;
      continue;
    }
    const std::int64_t share = j + 1 == plan.seqs.size() ? left
                               : tokens > 0 ? step_uj * plan.seqs[j].num_new / tokens
                                            : step_uj / static_cast<std::int64_t>(plan.seqs.size());
    left -= share;
    s.energy_uj += share;
  }
}

// The engine plans step N+1 as step N starts, from the state it then has:
// the first plan after a completion sees the arrivals up to that step's
// start (in the engine a little host time has passed since the completion:
// the rule does not ask for `now` to equal it). Any later plan (the engine
// idle since) sees everything; so does a plan with another in flight
// (pipeline stages), whose steps already overlap.
Time Scheduler::admit_horizon_for(Time now) const {
  if (!config_.scheduler.async_scheduling || planned_since_done_ || num_in_flight_ > 0) return now;
  return std::min(now, last_done_start_);
}

void Scheduler::flush_itl(Seq& s, std::size_t extra) {
  const std::size_t need = s.itl.size() + static_cast<std::size_t>(s.run_gaps) + extra;
  if (need > s.itl.capacity()) {
    // Bounded: a huge output_len must not reserve memory it may never use.
    const auto expected = static_cast<std::size_t>(std::min(s.output_len - 1, 4096));
    s.itl.reserve(std::max({need, expected, 2 * s.itl.capacity()}));
  }
  for (std::int64_t c = s.last_sample - s.run_gaps + 1; c <= s.last_sample; ++c) {
    s.itl.push_back(done_at(c) - done_at(c - 1));
  }
  s.run_gaps = 0;
}

// Drops the completion times no live request's ITL run still needs. Called
// when the log has doubled since the last trim: amortised O(1) per step.
void Scheduler::trim_done_times() {
  std::int64_t keep_from = done_base_ + static_cast<std::int64_t>(done_times_.size());
  for (const Seq& s : seqs_) {
    if (s.state == State::free || s.state == State::ended || s.num_output == 0 || s.last_sample < 0) continue;
    keep_from = std::min(keep_from, s.last_sample - s.run_gaps);
  }
  done_times_.erase(done_times_.begin(), done_times_.begin() + static_cast<std::ptrdiff_t>(keep_from - done_base_));
  done_base_ = keep_from;
  trim_at_ = std::max<std::size_t>(4096, 2 * done_times_.size());
}

// ---- disaggregation -----------------------------------------------------------

void Scheduler::hand_off(std::int32_t slot) {
  Seq& s = seqs_[static_cast<std::size_t>(slot)];
  // The decode side keeps the cancel time from here on.
  if (s.deadline != kNoTime) {
    deadlines_.erase({s.deadline, slot});
    s.deadline = kNoTime;
  }
  if (s.batch_member) {
    --members_alive_;
    s.batch_member = false;
  }
  Handoff h;
  h.request = s.req;
  h.from_replica = index_;
  h.prefill_start = disagg_[static_cast<std::size_t>(slot)].prefill_start;
  h.first_token = s.first_token;
  h.cached_prompt_tokens = s.cached_prompt_tokens;
  h.preemptions = s.preemptions;
  h.energy_uj = s.energy_uj;
  handoffs_.push_back(std::move(h));
  s.state = State::held;
}

void Scheduler::release_handoff(RequestId id) {
  const auto it = id_to_slot_.find(id);
  if (it == id_to_slot_.end()) return;
  const std::int32_t slot = it->second;
  Seq& s = seqs_[static_cast<std::size_t>(slot)];
  if (s.state != State::held) return;
  id_to_slot_.erase(it);
  s.state = State::ended;
  release_slot(slot);
}

void Scheduler::accept_handoff(Handoff h, Time now) {
  if (id_to_slot_.count(h.request.id)) {
    throw Error("replica " + std::to_string(index_) + ": request id " + std::to_string(h.request.id) +
                " is already in flight");
  }
  if (std::optional<std::string> reason = rejection_reason(h.request)) {
    RequestRecord r;
    r.id = h.request.id;
    r.replica = index_;
    r.outcome = Outcome::rejected;
    r.reason = "decode replica: " + *reason;
    r.arrival = h.request.arrival;
    r.first_token = h.first_token;
    r.finish = now;
    r.prompt_tokens = h.request.prompt_len;
    r.output_tokens = 1;
    r.cached_prompt_tokens = h.cached_prompt_tokens;
    r.preemptions = h.preemptions;
    r.energy_uj = h.energy_uj;
    r.prefill_replica = h.from_replica;
    finished_.push_back(std::move(r));
    return;
  }
  const std::int32_t slot = new_slot();
  Seq& s = seqs_[static_cast<std::size_t>(slot)];
  s.req = std::move(h.request);
  s.id = s.req.id;
  s.cancel_time = s.req.cancel_time;
  s.prompt_len = s.req.prompt_len;
  s.output_len = s.req.output_len;
  s.num_output = 1;
  s.last_sample = kSampledElsewhere;
  s.first_token = h.first_token;
  s.first_scheduled = h.prefill_start;  // scheduled on the prefill side
  s.cached_prompt_tokens = h.cached_prompt_tokens;
  s.preemptions = h.preemptions;
  s.energy_uj = h.energy_uj;
  s.admitted_once = true;  // no queue deadline: it was scheduled on the prefill side
  s.queued_at = now;
  s.added_at = now;
  kv_.init_seq(s.req, s.kv);
  id_to_slot_.emplace(s.id, slot);
  if (!disagg_.empty()) {
    DisaggSeq& d = disagg_[static_cast<std::size_t>(slot)];
    d.from_replica = h.from_replica;
    d.prefill_start = h.prefill_start;
  }
  s.state = State::inbound;
  inbound_.push_back(slot);
  set_deadline(slot);
}

void Scheduler::start_inbound(Time now, std::vector<InboundTransfer>& out) {
  out.clear();
  const auto max_seqs = static_cast<std::size_t>(config_.scheduler.max_num_seqs);
  // First come first served, head of line: as admission, so a long prompt
  // is not starved by shorter ones behind it.
  while (!inbound_.empty() && running_.size() + receiving_.size() < max_seqs) {
    const std::int32_t slot = inbound_.front();
    Seq& s = seqs_[static_cast<std::size_t>(slot)];
    // Blocks this replica already caches need not move.
    const std::int32_t hit_blocks = kv_.lookup(s.req, s.kv);
    if (!kv_.allocate(s.req, s.kv, hit_blocks, s.prompt_len, true)) break;
    inbound_.pop_front();
    s.state = State::receiving;
    s.in_flight = true;
    receiving_.push_back(slot);
    InboundTransfer t;
    t.id = s.id;
    t.to_replica = index_;
    t.tokens = s.prompt_len - hit_blocks * block_size_;
    t.prefill_end = s.first_token;
    t.start = now;
    if (!disagg_.empty()) {
      DisaggSeq& d = disagg_[static_cast<std::size_t>(slot)];
      d.kv_reserved = now;
      t.from_replica = d.from_replica;
      t.prefill_start = d.prefill_start;
    }
    out.push_back(t);
  }
}

void Scheduler::finish_inbound(RequestId id, Time now, std::int64_t bytes) {
  const auto pos = std::find_if(receiving_.begin(), receiving_.end(),
                                [&](std::int32_t slot) { return seqs_[static_cast<std::size_t>(slot)].id == id; });
  if (pos == receiving_.end()) {
    throw Error("replica " + std::to_string(index_) + ": KV of request " + std::to_string(id) +
                " arrived, but no transfer of it was started");
  }
  const std::int32_t slot = *pos;
  receiving_.erase(pos);
  Seq& s = seqs_[static_cast<std::size_t>(slot)];
  s.in_flight = false;
  if (s.state == State::ended) {  // cancelled while its KV was on the way
    release_slot(slot);
    return;
  }
  s.state = State::running;
  s.num_computed = s.prompt_len;
  kv_.publish(s.req, s.kv, s.prompt_len);
  running_.push_back(slot);
  if (!disagg_.empty()) {
    DisaggSeq& d = disagg_[static_cast<std::size_t>(slot)];
    d.kv_arrived = now;
    d.kv_bytes = bytes;
  }
}

// ---- queries ----------------------------------------------------------------

std::vector<RequestRecord> Scheduler::take_finished() {
  std::vector<RequestRecord> out;
  out.swap(finished_);
  return out;
}

std::vector<StepRecord> Scheduler::take_steps() {
  std::vector<StepRecord> out;
  out.swap(steps_);
  return out;
}

std::optional<Time> Scheduler::next_wakeup() const {
  std::optional<Time> t;
  if (!deadlines_.empty()) t = deadlines_.begin()->first;
  if (batch_mode_ && members_alive_ == 0 && !queue_.empty()) {
    if (const std::optional<Time> due = batch_->ready_at(Waiting(*this))) t = t ? std::min(*t, *due) : *due;
  }
  return t;
}

std::int32_t Scheduler::cached_prefix_tokens(const Request& req) const {
  SeqKv probe;
  kv_.init_seq(req, probe);
  return kv_.lookup(req, probe) * block_size_;
}

std::optional<SeqView> Scheduler::seq(RequestId id) const {
  const auto it = id_to_slot_.find(id);
  if (it == id_to_slot_.end()) return std::nullopt;
  const Seq& s = seqs_[static_cast<std::size_t>(it->second)];
  return SeqView{&s.req, &s.kv, s.num_computed, s.num_output};
}

std::vector<SeqView> Scheduler::live_seqs() const {
  std::vector<SeqView> out;
  for (const auto& s : seqs_) {
    if (s.state != State::free) out.push_back(SeqView{&s.req, &s.kv, s.num_computed, s.num_output});
  }
  std::sort(out.begin(), out.end(), [](const SeqView& a, const SeqView& b) { return a.request->id < b.request->id; });
  return out;
}

}  // namespace twin
