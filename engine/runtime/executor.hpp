#pragma once
// The engine's executor: runs a replica's StepPlan on the model runner — the
// plan's swap copies, then ONE forward pass over every scheduled token — and
// reports the sampled tokens. It keeps each request's generated tokens, since
// decodes and recompute after preemption feed them back in.
#include <cstdint>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/core/replica.hpp"
#include "engine/core/step_plan.hpp"
#include "engine/runtime/forward_batch.hpp"
#include "engine/runtime/model_runner.hpp"
#include "engine/runtime/proposer.hpp"

namespace twin {

struct ExecutorOptions {
  float temperature = 0.0f;  // <= 0: greedy
  std::int32_t top_k = 0;
  float top_p = 1.0f;
  std::uint64_t seed = 0;    // sampling seed
  TokenId eos_token = -1;    // >= 0: report requests that sample it (the core stops them with stop_at_eos)
  bool keep_logits = false;  // copy each step's sampling logits to the host (tests)
};

// One request's own sampling, in place of ExecutorOptions' (a front end's
// per-request temperature, top_k, top_p and seed). EOS stays the
// executor's rule.
struct RequestSampling {
  float temperature = 0.0f;
  std::int32_t top_k = 0;
  float top_p = 1.0f;
  std::uint64_t seed = 0;
};

class Executor {
 public:
  // `proposer` (may be null; it must outlive the executor) fills the plan's
  // lookahead slots; a plan with lookahead and no proposer is an Error.
  // Speculation verifies greedily: temperature > 0 with a proposer is a
  // UsageError.
  Executor(ModelRunner& runner, const ExecutorOptions& options = {}, Proposer* proposer = nullptr);

  // Runs `plan`, whose requests must be live in `replica`. Throws twin::Error
  // if a request's tokens are unknown (a decode for a request never sampled).
  StepResult execute(const StepPlan& plan, const Replica& replica);

  // Measured time of the last execute (swaps + forward + sampling), ns.
  Time last_duration() const { return last_duration_; }
  // Per executed step (step id, time per op) while the runner times its ops
  // (ModelRunner::set_time_ops), in execution order.
  const std::vector<std::pair<std::uint64_t, OpTimes>>& step_op_times() const { return step_op_ns_; }
  // Logits of the last step's sampling seqs, [n, vocab] in plan order (keep_logits).
  const std::vector<float>& last_logits() const { return output_.logits; }

  // Samples request `id` with its own settings until forget(id). Throws
  // UsageError for temperature > 0 under speculative decoding.
  void set_request_sampling(RequestId id, const RequestSampling& sampling);

  // Tokens generated so far by a live request, or nullptr.
  const std::vector<TokenId>* output_tokens(RequestId id) const;
  // Drops a request's tokens once it has ended (finished, aborted, rejected).
  void forget(RequestId id) {
    outputs_.erase(id);
    request_sampling_.erase(id);
    if (proposer_) proposer_->forget(id);
  }
  std::size_t num_tracked() const { return outputs_.size(); }
  // Prefill/decode disaggregation: request `id`'s tokens so far (and its own
  // sampling) move to `to`, the executor of the replica its KV moved to.
  void hand_over(RequestId id, Executor& to);

  ModelRunner& runner() { return runner_; }

 private:
  // Greedy verification of seq j's proposals against the target's tokens:
  // appends the produced tokens, returns how many proposals were accepted.
  std::int32_t accept(RequestId id, std::span<const TokenId> proposals, std::span<const TokenId> target,
                      StepResult& result);
  // execute()'s steps, in order: the plan's block copies; each seq as the
  // proposer sees it (proposer_seqs_, token_index_) and its proposals; the
  // forward batch; the sampled tokens accepted into the result.
  void apply_copies(const StepPlan& plan);
  void gather_seqs(const StepPlan& plan, const Replica& replica);
  void propose(const StepPlan& plan);
  void build_batch(const StepPlan& plan);
  StepResult take_sampled(const StepPlan& plan, bool speculative);

  ModelRunner& runner_;
  ExecutorOptions options_;
  Proposer* proposer_ = nullptr;
  std::vector<ProposerSeq> proposer_seqs_;
  std::vector<TokenId> proposals_;
  std::vector<std::int64_t> token_index_;  // per plan seq: its output tokens before the step
  std::map<RequestId, std::vector<TokenId>> outputs_;
  std::unordered_map<RequestId, RequestSampling> request_sampling_;
  ForwardBatch batch_;
  ForwardOutput output_;
  Time last_duration_ = 0;
  std::vector<std::pair<std::uint64_t, OpTimes>> step_op_ns_;
};

}  // namespace twin
