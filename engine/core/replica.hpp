#pragma once
// The state machine both the engine and the simulator drive:
//   add(request, now) -> plan(now) -> [executor runs it] -> complete(plan, result, now)
// It holds the scheduler and the KV cache and records what happened. With
// pipeline parallelism up to max_plans_in_flight plans may be outstanding; a
// request in an outstanding plan is neither scheduled again nor preempted
// until that plan completes.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/disaggregation.hpp"
#include "engine/core/kv_cache.hpp"
#include "engine/core/records.hpp"
#include "engine/core/request.hpp"
#include "engine/core/scheduler_config.hpp"
#include "engine/core/step_plan.hpp"

namespace twin {

struct ReplicaConfig {
  SchedulerConfig scheduler;
  KvCacheConfig kv;
  std::int32_t max_plans_in_flight = 1;  // pipeline stages
  // Steps of at most this many tokens run as captured GPU graphs padded to
  // a capture size (vLLM's max graph capture size, SGLang's largest graph
  // batch), and a cost model prices them padded; the scheduler ignores it.
  // 0: eager (--enforce-eager); -1: the engine's default
  // (sim/graph_capture.hpp).
  std::int32_t graph_capture_max_tokens = 0;
  // The engine all-reduces small TP messages with its own kernel over peer
  // memory instead of NCCL (vLLM's --disable-custom-all-reduce is false);
  // a cost model prices it (sim/custom_all_reduce.hpp); the scheduler
  // ignores it. On for the vllm, vllm-v0, sglang and trtllm presets.
  bool custom_all_reduce = false;
  // A step mixing a prefill chunk with decodes runs its attention as one
  // varlen kernel call whose query tiles pad each decode's query to this
  // many rows per head (vLLM's FlashAttention-2 backend: 64); a cost model
  // prices it (sim/mixed_attention.hpp); the scheduler ignores it. 0: the
  // engine runs prefill and decode attention apart; -1: the engine's
  // default on the device.
  std::int32_t mixed_attention_rows = -1;
  ReplicaRole role = ReplicaRole::mixed;   // its pool under disaggregation
};

// Named presets setting scheduler AND KV knobs (vllm, vllm-v0, sarathi, orca, static,
// dynamic, lightllm); see scheduler.md. kv.num_blocks stays 0: the caller sizes
// the cache from memory. Throws UsageError listing the known names.
std::vector<std::string> replica_preset_names();
ReplicaConfig replica_preset(std::string_view name);
// Sets one knob by key: every set_scheduler_option key, the KV keys
// (block_size, enable_prefix_caching, num_gpu_blocks / num_blocks, watermark,
// num_host_blocks, contiguous) and max_plans_in_flight. max_model_len sets both
// the scheduler's and the cache's. Throws UsageError naming the key or value.
void set_replica_option(ReplicaConfig& config, std::string_view key, std::string_view value);
// Throws UsageError when the knobs contradict each other or are out of range.
void validate(const ReplicaConfig& config);

// Per-request serving state, readable by the executor (block table, counts).
struct SeqView {
  const Request* request = nullptr;
  const SeqKv* kv = nullptr;
  std::int32_t num_computed = 0;
  std::int32_t num_output = 0;        // tokens generated so far
};

class Scheduler;  // engine/core/scheduler.hpp

class Replica {
 public:
  Replica(const ReplicaConfig& config, std::int32_t index);
  ~Replica();
  Replica(Replica&&) noexcept;
  Replica& operator=(Replica&&) noexcept;

  std::int32_t index() const;
  const ReplicaConfig& config() const;

  // Queues a request. One that can never be served (prompt + output beyond
  // max_model_len, or more blocks than the whole cache), or one that finds
  // max_queued_requests waiting ("queue full"), is rejected at once: its
  // record appears in take_finished().
  void add(Request request, Time now);
  // Why add() would reject `req` at once (nullopt: it would queue it). It
  // reads only the request's numbers (and its tokens, if it carries any), so
  // a caller can skip building per-token state for a request that will be
  // rejected anyway: add() then records the same rejection.
  std::optional<std::string> rejection_reason(const Request& req) const;
  // add()'s verdict if called now: rejection_reason, or "queue full" when
  // max_queued_requests are waiting (a front end answers before add()).
  std::optional<std::string> admission_reason(const Request& req) const;
  // Ends a request wherever it is (queued, running, swapped), recording
  // `reason` (e.g. "interrupted" when the engine was stopped).
  void abort(RequestId id, Time now, const std::string& reason = "aborted");
  // Ends every request admitted and not yet ended (waiting, running,
  // swapped), in id order, recording `reason`; returns how many. A serving
  // loop ends a run with it: "aborted" when nothing left to happen could
  // serve them, "interrupted" when the run was stopped.
  std::int64_t abort_all(Time now, const std::string& reason = "aborted");

  // The next step, or an empty plan when there is nothing to do now.
  StepPlan plan(Time now);
  // The same, into a plan the caller recycles: its vectors keep their
  // capacity (no allocation per step). Any previous contents are replaced.
  void plan_into(StepPlan& plan, Time now);
  // The step `plan` finished at `now`.
  void complete(const StepPlan& plan, const StepResult& result, Time now);

  // ---- disaggregation (disaggregation.hpp) ----
  // Prefill role: requests whose prefill completed with tokens left to
  // generate, since the last call (cleared first). Each stays held here,
  // its KV blocks kept, until release_handoff().
  void take_handoffs(std::vector<Handoff>& out);
  // Frees a held request's blocks (its KV has moved, or it ended on the
  // decode side before the transfer began). Unknown ids are a no-op.
  void release_handoff(RequestId id);
  // Decode role: takes a hand-off. One it can never serve is rejected at
  // once (its record in take_finished()); the others wait, first come first
  // served, for blocks to receive their KV.
  void accept_handoff(Handoff handoff, Time now);
  // Reserves blocks for waiting hand-offs in arrival order, while they fit
  // (the watermark kept free, max_num_seqs counting the requests receiving),
  // and appends the transfers that may start now (cleared first).
  void start_inbound(Time now, std::vector<InboundTransfer>& out);
  // The KV of a transfer started by start_inbound() is here: the request
  // joins the running requests and decodes from its next step. `bytes` is
  // what moved, for its record.
  void finish_inbound(RequestId id, Time now, std::int64_t bytes);

  // Records of requests that ended since the last call, in the order they ended.
  std::vector<RequestRecord> take_finished();
  // Step records since the last call.
  std::vector<StepRecord> take_steps();
  // The same two, into a buffer the caller recycles (cleared first): buffers
  // trade places with the replica's, so a loop calling these allocates
  // nothing per step.
  void take_finished(std::vector<RequestRecord>& out);
  void take_steps(std::vector<StepRecord>& out);
  // `every` > 1: only the steps keeps_step() keeps (records.hpp).
  void set_record_steps(bool on, std::uint64_t every = 1);
  // Every step completed so far, whether or not its record was kept.
  const StepTally& step_tally() const;

  // When plan() may have work without any new arrival or completion (dynamic
  // batching timeout, a cancel time, a queue deadline of max_queue_time), if any.
  std::optional<Time> next_wakeup() const;

  bool can_plan() const;                // fewer than max_plans_in_flight outstanding
  std::int32_t plans_in_flight() const;
  bool has_work() const;                // anything queued or running
  std::int32_t num_waiting() const;
  std::int32_t num_running() const;
  std::int64_t num_outstanding() const; // admitted, not yet ended
  double kv_usage() const;
  const KvCacheStats& kv_stats() const;
  // Prompt tokens of req this replica's cache would serve now (router).
  std::int32_t cached_prefix_tokens(const Request& req) const;
  // Serving state of a request in flight, or nullopt.
  std::optional<SeqView> seq(RequestId id) const;
  // Every request admitted and not yet ended (waiting, running, swapped), in
  // id order: for invariant checks (block tables vs ref counts).
  std::vector<SeqView> live_seqs() const;
  const KvCache& kv_cache() const;

 private:
  std::unique_ptr<Scheduler> impl_;
};

}  // namespace twin
