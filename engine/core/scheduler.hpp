#pragma once
// The token-budget scheduler behind Replica (replica.hpp is its public face;
// scheduler.md describes the algorithm and the choices). One class, configured
// by SchedulerConfig: continuous / static / dynamic batching, decode-first or
// prefill-first, chunked prefill, queue orders, recompute or swap preemption.
//
// Per-step cost is linear in the scheduled batch: requests live in a slot
// vector, plans in flight remember their slots, so no hash lookup happens per
// scheduled sequence; KV is allocated only when a block boundary is crossed.
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/core/kv_cache.hpp"
#include "engine/core/policy.hpp"
#include "engine/core/records.hpp"
#include "engine/core/replica.hpp"
#include "engine/core/request_queue.hpp"
#include "engine/core/step_plan.hpp"

namespace twin {

class Scheduler {
 public:
  Scheduler(const ReplicaConfig& config, std::int32_t index);

  std::int32_t index() const { return index_; }
  const ReplicaConfig& config() const { return config_; }

  void add(Request request, Time now);
  // Why add() would reject `req` at once, from its numbers alone; nullopt if
  // it would queue it.
  std::optional<std::string> rejection_reason(const Request& req) const;
  // The same, and "queue full" when max_queued_requests wait: add()'s verdict now.
  std::optional<std::string> admission_reason(const Request& req) const;
  void abort(RequestId id, Time now, const std::string& reason = "aborted");
  // Replica::abort_all: requests held for a hand-off are released, not
  // ended (the decode side owns their record).
  std::int64_t abort_all(Time now, const std::string& reason);
  StepPlan plan(Time now);
  // As plan(now), into `plan`: its vectors keep their capacity, so a caller
  // that recycles plans allocates nothing per step.
  void plan_into(StepPlan& plan, Time now);
  void complete(const StepPlan& plan, const StepResult& result, Time now);

  std::vector<RequestRecord> take_finished();
  std::vector<StepRecord> take_steps();
  void take_finished(std::vector<RequestRecord>& out) {
    out.clear();
    out.swap(finished_);
  }
  void take_steps(std::vector<StepRecord>& out) {
    out.clear();
    out.swap(steps_);
  }
  void set_record_steps(bool on, std::uint64_t every = 1) {
    record_steps_ = on;
    record_every_ = every;
  }
  // Every step completed so far, recorded or not.
  const StepTally& step_tally() const { return step_tally_; }

  // Disaggregation: Replica's calls of the same names.
  void take_handoffs(std::vector<Handoff>& out) {
    out.clear();
    out.swap(handoffs_);
  }
  void release_handoff(RequestId id);
  void accept_handoff(Handoff handoff, Time now);
  void start_inbound(Time now, std::vector<InboundTransfer>& out);
  void finish_inbound(RequestId id, Time now, std::int64_t bytes);
  std::optional<Time> next_wakeup() const;

  bool can_plan() const { return plans_in_flight() < config_.max_plans_in_flight; }
  std::int32_t plans_in_flight() const { return num_in_flight_; }
  bool has_work() const {
    return !queue_.empty() || !running_.empty() || !swapped_.empty() || !inbound_.empty() || !receiving_.empty();
  }
  std::int32_t num_waiting() const { return static_cast<std::int32_t>(queue_.size()); }
  std::int32_t num_running() const { return static_cast<std::int32_t>(running_.size()); }
  std::int64_t num_outstanding() const { return static_cast<std::int64_t>(id_to_slot_.size()); }
  double kv_usage() const { return kv_.usage(); }
  const KvCacheStats& kv_stats() const { return kv_.stats(); }
  const KvCache& kv_cache() const { return kv_; }
  std::int32_t cached_prefix_tokens(const Request& req) const;
  std::optional<SeqView> seq(RequestId id) const;
  std::vector<SeqView> live_seqs() const;

 private:
  // held: prefill done on a prefill replica, blocks kept until the KV has
  // moved; inbound: a hand-off waiting for blocks on a decode replica;
  // receiving: blocks reserved there, its KV on the way.
  enum class State : std::uint8_t { free, waiting, running, swapped, ended, held, inbound, receiving };

  // Field order is deliberate: the per-step fields (and copies of the
  // request's id and lengths) share the first cache line with the block
  // table's pointers, so scheduling and completing a decode touches one line
  // per request; the request itself and the rest are cold.
  //
  // Inter-token gaps are not stored per token: a request that samples in
  // consecutive completions of this replica has gaps equal to the differences
  // of those completions' times (done_times_), so only the run's length is
  // counted here; the gaps are written into `itl` when the run breaks or the
  // request ends (a store per token into a line per request was a sixth of a
  // big simulation's time).
  struct alignas(64) Seq {
    RequestId id = 0;            // copies of req's, set at add()
    std::int64_t last_sample = -1;  // completion index of the last sampled token
    std::int32_t num_computed = 0;
    std::int32_t num_output = 0;
    std::int32_t prompt_len = 0;
    std::int32_t output_len = 0;
    State state = State::free;
    bool in_flight = false;      // in an outstanding plan
    bool scheduled = false;      // in the plan being built
    std::int32_t run_gaps = 0;   // gaps of completions (last_sample - run_gaps, last_sample] not yet in itl
    Time cancel_time = kNoTime;  // req's, set at add(): complete() reads it for every seq of every step
    SeqKv kv;
    std::vector<Time> itl;
    bool admitted_once = false;
    bool batch_member = false;   // static / dynamic: part of the current batch
    std::int32_t cached_prompt_tokens = 0;
    std::int32_t preemptions = 0;
    std::int64_t energy_uj = 0;     // its share of its steps' energy (-1: one was not known)
    Time queued_at = 0;
    Time added_at = 0;              // when add() took it: async scheduling admits it from the next plan made after
    Time first_token = kNoTime;
    Time first_scheduled = kNoTime;
    Time queue_deadline = kNoTime;  // max_queue_time: rejected if never scheduled by then
    Time deadline = kNoTime;        // its key in deadlines_: the earlier of the cancel time and queue_deadline
    QueueEntry queue_entry;
    Request req;

    std::int32_t known_tokens() const { return prompt_len + num_output; }
  };

  // A slot's disaggregation figures, beside seqs_ (kept only by replicas
  // with a pool role, so the hot Seq stays as it is).
  struct DisaggSeq {
    std::int32_t from_replica = -1;  // decode side: the prefill replica
    Time prefill_start = kNoTime;    // prefill side: its first prefill step
    Time kv_reserved = kNoTime;
    Time kv_arrived = kNoTime;
    std::int64_t kv_bytes = 0;
  };

  // last_sample of a request whose earlier tokens were sampled on another
  // replica: never one less than a completion index of this one.
  static constexpr std::int64_t kSampledElsewhere = -2;

  struct InFlight {
    std::uint64_t step_id = 0;
    std::vector<std::int32_t> slots;  // parallel to the plan's seqs
    StepRecord record;
    bool active = false;
  };

  class Waiting;  // the queue as a BatchPolicy reads it
  class Running;  // the running list as a VictimPolicy reads it

  std::int32_t new_slot();
  void end_request(std::int32_t slot, Outcome outcome, std::string reason, Time now, bool remove_from_running);
  void hand_off(std::int32_t slot);
  void release_slot(std::int32_t slot);
  void enqueue(std::int32_t slot, bool at_front, Time now);

  // plan_into()'s steps.
  void plan_passes(StepPlan& plan, Time now);
  void observe_for_admission();
  InFlight& open_in_flight(StepPlan& plan);
  void process_deadlines(Time now, StepPlan& plan);
  void set_deadline(std::int32_t slot);
  void maybe_form_batch(Time now);
  Time oldest_queued_at() const;
  void schedule_running(StepPlan& plan, bool prefill_only);
  void swap_in_pass(StepPlan& plan);
  void admit_pass(StepPlan& plan);
  bool try_admit(StepPlan& plan, std::int32_t slot, std::int32_t hit_blocks);
  std::size_t pick_victim() const;
  void preempt(StepPlan& plan, std::size_t running_index);
  bool ensure_kv(Seq& s, std::int32_t total_tokens);
  std::int32_t chunk(const Seq& s) const;
  Time done_at(std::int64_t completion) const {
    return done_times_[static_cast<std::size_t>(completion - done_base_)];
  }
  void flush_itl(Seq& s, std::size_t extra);
  void apportion_energy(const StepPlan& plan, const InFlight& entry, std::int64_t step_uj);
  // complete()'s steps.
  InFlight* in_flight_entry(const StepPlan& plan);
  std::int32_t verified_lookahead(InFlight& entry, const StepPlan& plan, const StepResult& result, std::size_t j,
                                  RequestId id);
  void advance_computed(Seq& s, const ScheduledSeq& q, std::int32_t accepted, bool own_blocks);
  void record_sample(Seq& s, std::int32_t produced, std::int64_t completion, Time now);
  void close_step(InFlight& entry, const StepPlan& plan, const StepResult& result, Time now);
  void trim_done_times();
  void add_to_plan(StepPlan& plan, std::int32_t slot, std::int32_t num_new, std::int32_t lookahead = 0);
  // Lookahead tokens for `s` scheduled for `n` known tokens this step: k for
  // a decode, capped by its output left (the step produces at most
  // lookahead + 1 tokens) and by the budget; 0 for a prefill chunk.
  std::int32_t lookahead_for(const Seq& s, std::int32_t n) const;
  bool needs_prefill(const Seq& s) const {
    return s.num_computed < s.prompt_len || s.num_computed + 1 < s.known_tokens();
  }
  bool batch_mode() const { return batch_mode_; }

  ReplicaConfig config_;
  std::int32_t index_;
  // The plug-in policies (policy.hpp) named by config_.scheduler; the queue
  // order lives in queue_.
  std::unique_ptr<AdmissionPolicy> admission_;
  std::unique_ptr<VictimPolicy> victim_;
  std::unique_ptr<BatchPolicy> batch_;
  bool batch_mode_;  // batch_->forms_batches(), read per queue entry in an admission pass
  KvCache kv_;
  std::int32_t token_budget_;
  std::int32_t block_size_;
  bool contiguous_;

  std::vector<Seq> seqs_;
  std::vector<DisaggSeq> disagg_;         // parallel to seqs_ when role != mixed, else empty
  std::vector<Handoff> handoffs_;         // prefill role: not yet taken
  std::deque<std::int32_t> inbound_;      // decode role: hand-offs waiting for blocks, first come first
  std::vector<std::int32_t> receiving_;   // decode role: blocks reserved, KV on the way
  std::vector<std::int32_t> free_slots_;
  std::unordered_map<RequestId, std::int32_t> id_to_slot_;  // arrivals, aborts, lookups only
  RequestQueue queue_;
  std::vector<std::int32_t> running_;     // admission order (vLLM's running list)
  std::deque<std::int32_t> swapped_;      // swap-out order; swapped back in first come first
  // (deadline, slot): cancel times, and queue deadlines of requests never
  // scheduled; next_wakeup() reads the first.
  std::set<std::pair<Time, std::int32_t>> deadlines_;

  std::int32_t members_alive_ = 0;        // static / dynamic batch
  std::int32_t members_waiting_ = 0;

  // Plan under construction.
  std::int32_t budget_left_ = 0;
  // Async scheduling: requests added after this time are not admitted by the
  // plan being built (it stands for a plan the engine made one step ago).
  Time admit_horizon_ = 0;
  Time admit_horizon_for(Time now) const;
  Time last_done_start_ = 0;        // start of the latest completed step
  bool planned_since_done_ = true;  // plan() ran since that completion
  bool preempted_ = false;
  // What the last plan did, for the admission policy (observe_for_admission).
  struct LastPlan {
    bool preempted = false, decoded = false;
  } last_plan_;
  std::vector<std::int32_t> building_slots_;
  std::vector<std::pair<std::int32_t, std::int32_t>> lpm_order_;  // (-hit blocks, slot)

  std::vector<InFlight> in_flight_;
  std::int32_t num_in_flight_ = 0;
  std::uint64_t next_step_id_ = 0;
  std::vector<RequestId> stopped_sorted_;
  // Times of this replica's step completions, complete() by complete(), from
  // completion index done_base_ on: what the live requests' ITL runs need.
  std::vector<Time> done_times_;
  std::int64_t done_base_ = 0;
  std::size_t trim_at_ = 4096;

  bool record_steps_ = false;
  std::uint64_t record_every_ = 1;
  std::vector<RequestRecord> finished_;
  std::vector<StepRecord> steps_;
  StepTally step_tally_;
};

}  // namespace twin
