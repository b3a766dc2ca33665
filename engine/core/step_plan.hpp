#pragma once
// What one step does: the scheduler's output, the executor's input.
#include <cstdint>
#include <vector>

#include "base/types.hpp"
#include "engine/core/kv_cache.hpp"

namespace twin {

struct ScheduledSeq {
  RequestId id = 0;
  std::int32_t num_computed = 0;  // tokens whose KV exists before this step (context)
  std::int32_t num_new = 0;       // tokens processed this step: [num_computed, num_computed + num_new)
  bool samples = false;           // this step produces the request's next output token
  bool is_prefill = false;        // the new tokens are (re)computed prompt, not decode
  // Speculative decoding: the last num_lookahead of the num_new tokens are
  // proposals (a draft's, or n-gram lookup's) verified this step; 0 without.
  // Only a decode (one known token to process) gets lookahead.
  std::int32_t num_lookahead = 0;
};

struct StepPlan {
  std::uint64_t step_id = 0;
  Time start = 0;                      // the `now` the plan was made at
  std::vector<ScheduledSeq> seqs;      // decodes and prefill chunks, in batch order
  std::vector<RequestId> preempted;    // preempted this step (recompute or swap)
  std::vector<RequestId> aborted;      // cancelled at this step boundary: drop their state
  std::vector<BlockCopy> swap_out;     // device -> host copies to do before the step
  std::vector<BlockCopy> swap_in;      // host -> device copies to do before the step
  // Tiers below HBM (kv_tiers.hpp; empty without, or when nothing moved):
  // per tier, prefix blocks loaded from it into HBM before the step runs,
  // and blocks written into it (spilled evictions, demotions) since the
  // previous plan.
  std::vector<std::int32_t> tier_loads;
  std::vector<std::int32_t> tier_stores;
  // The copies behind them, in order, where the KV cache records them
  // (KvCacheConfig::record_tier_copies: an engine that keeps the tiers' KV).
  std::vector<TierCopy> tier_copies;

  bool empty() const { return seqs.empty() && swap_out.empty() && swap_in.empty(); }
  std::int64_t num_lookahead_tokens() const {
    std::int64_t n = 0;
    for (const auto& s : seqs) n += s.num_lookahead;
    return n;
  }
  std::int64_t num_batched_tokens() const {
    std::int64_t n = 0;
    for (const auto& s : seqs) n += s.num_new;
    return n;
  }
};

// What the executor reports back. The simulator fills only `accepted`.
struct StepResult {
  std::vector<TokenId> sampled;       // the sampling seqs' tokens, in plan order (engine only)
  std::vector<RequestId> stopped;     // hit EOS (honoured with stop_at_eos)
  // When the plan has lookahead: one entry per plan seq, in plan order, the
  // number of its proposals accepted (0..num_lookahead; 0 for a seq without
  // lookahead). The step produced accepted + 1 tokens for a sampling seq.
  std::vector<std::int32_t> accepted;
  // Energy (issue 44): what the clock priced the step's GPUs to draw over
  // their busy time, in microjoules (-1: not known, as on the engine), and
  // what the same GPUs would have drawn idle over that time.
  std::int64_t energy_uj = -1;
  std::int64_t idle_baseline_uj = 0;
};

}  // namespace twin
