#pragma once
// What a replica reports: one record per request when it ends, one per step.
// Engine and simulator write these in the same schema.
#include <cstdint>
#include <string>
#include <vector>

#include "base/types.hpp"

namespace twin {

enum class Outcome { finished, aborted, rejected };

struct RequestRecord {
  RequestId id = 0;
  std::int32_t replica = 0;
  Outcome outcome = Outcome::finished;
  std::string reason;                 // why rejected / aborted, empty otherwise
  Time arrival = 0;
  Time first_token = kNoTime;
  Time finish = kNoTime;              // last token, abort or rejection time
  // Its first step began (vLLM's scheduled_ts): first_scheduled - arrival is
  // the queue time vLLM reports; kNoTime if never scheduled.
  Time first_scheduled = kNoTime;
  std::int32_t prompt_tokens = 0;
  std::int32_t output_tokens = 0;     // generated
  std::int32_t cached_prompt_tokens = 0;  // served from the prefix cache at first admission
  std::int32_t preemptions = 0;
  // Issue 44: its share of the energy of the steps it ran in, apportioned
  // by its tokens in each step, microjoules; -1: not known (a step priced
  // without an energy, the engine). Idle draw between steps is not in it.
  std::int64_t energy_uj = -1;
  // Gaps between consecutive output tokens (ITL), in order; size output_tokens - 1.
  std::vector<Time> itl;
  // Disaggregation (engine/core/disaggregation.hpp): the prefill replica of
  // a request handed off to a decode replica (-1: none), when the decode
  // replica reserved blocks for its KV, when the KV was there, and its size.
  std::int32_t prefill_replica = -1;
  Time kv_reserved = kNoTime;
  Time kv_arrived = kNoTime;
  std::int64_t kv_transfer_bytes = 0;
};

struct StepRecord {
  std::uint64_t step_id = 0;
  std::int32_t replica = 0;
  Time start = 0;
  Time duration = 0;
  std::int32_t batch_size = 0;        // scheduled seqs
  std::int32_t num_prefill_seqs = 0;
  std::int32_t num_decode_seqs = 0;
  std::int64_t new_tokens = 0;        // tokens processed
  std::int64_t context_tokens = 0;    // KV tokens read (sum of num_computed)
  std::int32_t kv_blocks_used = 0;    // after the step
  std::int32_t preempted = 0;
  std::int32_t waiting = 0;           // queue length when planned
  std::int32_t swapped_out_blocks = 0;
  std::int32_t swapped_in_blocks = 0;
  // Speculative decoding (all 0 / empty without): lookahead tokens verified,
  // and of those accepted; per seq that had lookahead, in plan order, its
  // lookahead and accepted counts (what a replay needs to follow the run,
  // and what a measured acceptance rate is fitted to).
  std::int64_t proposed_tokens = 0;
  std::int64_t accepted_tokens = 0;
  std::vector<std::int32_t> lookahead;
  std::vector<std::int32_t> accepted;
  // Tiers below HBM (empty without): the plan's tier_loads / tier_stores.
  std::vector<std::int32_t> tier_loads;
  std::vector<std::int32_t> tier_stores;
  // Energy of the step's GPUs over their busy time, microjoules; -1: not
  // known (StepResult::energy_uj).
  std::int64_t energy_uj = -1;
};

// steps.csv's `sample:N` (N = every; 0 or 1: all): per replica, the steps
// whose id is a multiple of N. The replicas apply it before a record leaves
// them, the writer again for records from elsewhere.
inline bool keeps_step(std::uint64_t step_id, std::uint64_t every) { return every <= 1 || step_id % every == 0; }

// What a run's summary counts of its steps, kept by each replica for every
// step whether or not its record is passed on: integer sums and maxima, so
// tallies merged in any order give the same figures. A loop hands the sink
// its replicas' tallies, merged, once at the end (RecordSink::on_step_tally).
struct StepTally {
  std::uint64_t steps = 0;
  std::int64_t batch_size_sum = 0;
  std::int64_t kv_blocks_sum = 0;
  std::int64_t batch_size_max = 0;
  std::int64_t kv_blocks_max = 0;
  std::uint64_t proposed_tokens = 0;   // speculative lookahead verified
  std::uint64_t accepted_tokens = 0;
  std::uint64_t verifications = 0;     // seqs with lookahead, over all steps
  // Energy (issue 44), microjoules: steps with a known energy, their sum,
  // and the idle draw of their GPUs over the same busy time.
  std::uint64_t energy_steps = 0;
  std::int64_t energy_uj = 0;
  std::int64_t idle_baseline_uj = 0;

  void add(const StepRecord& s) {
    ++steps;
    batch_size_sum += s.batch_size;
    kv_blocks_sum += s.kv_blocks_used;
    batch_size_max = batch_size_max > s.batch_size ? batch_size_max : s.batch_size;
    kv_blocks_max = kv_blocks_max > s.kv_blocks_used ? kv_blocks_max : s.kv_blocks_used;
    proposed_tokens += static_cast<std::uint64_t>(s.proposed_tokens > 0 ? s.proposed_tokens : 0);
    accepted_tokens += static_cast<std::uint64_t>(s.accepted_tokens > 0 ? s.accepted_tokens : 0);
    verifications += s.lookahead.size();
  }
  void add_energy(std::int64_t step_uj, std::int64_t baseline_uj) {
    if (step_uj < 0) return;
    ++energy_steps;
    energy_uj += step_uj;
    idle_baseline_uj += baseline_uj;
  }
  void merge(const StepTally& o) {
    steps += o.steps;
    batch_size_sum += o.batch_size_sum;
    kv_blocks_sum += o.kv_blocks_sum;
    batch_size_max = batch_size_max > o.batch_size_max ? batch_size_max : o.batch_size_max;
    kv_blocks_max = kv_blocks_max > o.kv_blocks_max ? kv_blocks_max : o.kv_blocks_max;
    proposed_tokens += o.proposed_tokens;
    accepted_tokens += o.accepted_tokens;
    verifications += o.verifications;
    energy_steps += o.energy_steps;
    energy_uj += o.energy_uj;
    idle_baseline_uj += o.idle_baseline_uj;
  }
};

}  // namespace twin
