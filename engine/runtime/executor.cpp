#include "engine/runtime/executor.hpp"

#include <chrono>
#include <string>

#include "base/error.hpp"

namespace twin {

Executor::Executor(ModelRunner& runner, const ExecutorOptions& options, Proposer* proposer)
    : runner_(runner), options_(options), proposer_(proposer) {
  if (proposer_ && options_.temperature > 0.0f) {
    throw UsageError("speculative decoding verifies proposals greedily: it needs temperature 0 (got " +
                     std::to_string(options_.temperature) + "); rejection sampling is not implemented");
  }
}

void Executor::set_request_sampling(RequestId id, const RequestSampling& sampling) {
  if (proposer_ && sampling.temperature > 0.0f) {
    throw UsageError("request " + std::to_string(id) + ": speculative decoding verifies proposals greedily: it needs "
                     "temperature 0");
  }
  request_sampling_[id] = sampling;
}

const std::vector<TokenId>* Executor::output_tokens(RequestId id) const {
  const auto it = outputs_.find(id);
  return it == outputs_.end() ? nullptr : &it->second;
}

void Executor::hand_over(RequestId id, Executor& to) {
  if (&to == this) return;
  if (const auto it = outputs_.find(id); it != outputs_.end()) {
    to.outputs_[id] = std::move(it->second);
    outputs_.erase(it);
  }
  if (const auto it = request_sampling_.find(id); it != request_sampling_.end()) {
    to.request_sampling_[id] = it->second;
    request_sampling_.erase(it);
  }
  if (proposer_) proposer_->forget(id);
}

std::int32_t Executor::accept(RequestId id, std::span<const TokenId> proposals, std::span<const TokenId> target,
                              StepResult& result) {
  // target[i] is the target's token after the known token and proposals
  // 0..i-1; proposal i stands while it equals target[i]. The produced tokens
  // are the accepted proposals (= target's) and the target's next one.
  std::int32_t accepted = 0;
  while (accepted < static_cast<std::int32_t>(proposals.size()) &&
         proposals[static_cast<std::size_t>(accepted)] == target[static_cast<std::size_t>(accepted)]) {
    ++accepted;
  }
  std::vector<TokenId>& out = outputs_[id];
  for (std::int32_t i = 0; i <= accepted; ++i) {
    const TokenId t = target[static_cast<std::size_t>(i)];
    out.push_back(t);
    result.sampled.push_back(t);
    if (options_.eos_token >= 0 && t == options_.eos_token) {
      // The request stops at EOS: what came after it is not produced.
      result.stopped.push_back(id);
      return i;
    }
  }
  return accepted;
}

void Executor::apply_copies(const StepPlan& plan) {
  // Copies out first: a block swapped out may be reused by this very step.
  if (!plan.swap_out.empty()) {
    runner_.swap_out(plan.swap_out);
    if (proposer_) proposer_->swap_out(plan.swap_out);
  }
  // Tier copies between the two: a spill reads its evicted block before a
  // swap-in may land in it, and loads write only blocks taken this step.
  if (!plan.tier_copies.empty()) runner_.apply_tier_copies(plan.tier_copies);
  if (!plan.swap_in.empty()) {
    runner_.swap_in(plan.swap_in);
    if (proposer_) proposer_->swap_in(plan.swap_in);
  }
}

// The proposer sees every seq (a draft model mirrors the prefill chunks).
void Executor::gather_seqs(const StepPlan& plan, const Replica& replica) {
  proposer_seqs_.clear();
  token_index_.clear();
  for (const ScheduledSeq& q : plan.seqs) {
    const std::optional<SeqView> view = replica.seq(q.id);
    if (!view) throw Error("executor: request " + std::to_string(q.id) + " of step " + std::to_string(plan.step_id) +
                           " is not live in the replica");
    const Request& req = *view->request;
    if (static_cast<std::int32_t>(req.prompt_tokens.size()) != req.prompt_len) {
      throw Error("executor: request " + std::to_string(q.id) + " has no prompt tokens (materialize them before add)");
    }
    const std::vector<TokenId>& out = outputs_[q.id];
    const std::int32_t known_end = q.num_computed + q.num_new - q.num_lookahead;
    if (known_end > req.prompt_len + static_cast<std::int32_t>(out.size())) {
      throw Error("executor: request " + std::to_string(q.id) + " scheduled position " + std::to_string(known_end - 1) +
                  " but has generated only " + std::to_string(out.size()) + " tokens");
    }
    ProposerSeq p;
    p.id = q.id;
    p.prompt = req.prompt_tokens;
    p.output = out;
    p.num_computed = q.num_computed;
    p.num_known_new = q.num_new - q.num_lookahead;
    p.num_lookahead = q.num_lookahead;
    p.block_table = view->kv->blocks;
    proposer_seqs_.push_back(p);
    token_index_.push_back(view->num_output);
  }
}

void Executor::propose(const StepPlan& plan) {
  proposals_.clear();
  if (proposer_) proposer_->propose(proposer_seqs_, proposals_);
  if (static_cast<std::int64_t>(proposals_.size()) != plan.num_lookahead_tokens()) {
    throw Error("executor: the " + (proposer_ ? proposer_->name() : std::string("missing")) + " proposer gave " +
                std::to_string(proposals_.size()) + " proposals for " + std::to_string(plan.num_lookahead_tokens()) +
                " lookahead slots");
  }
}

// Each seq's known tokens and proposals, with its sampling settings (the
// request's own where it has them).
void Executor::build_batch(const StepPlan& plan) {
  batch_.clear();
  batch_.return_logits = options_.keep_logits;
  std::size_t next_proposal = 0;
  for (std::size_t j = 0; j < plan.seqs.size(); ++j) {
    const ScheduledSeq& q = plan.seqs[j];
    const ProposerSeq& p = proposer_seqs_[j];
    const auto prompt_len = static_cast<std::int32_t>(p.prompt.size());
    for (std::int32_t pos = q.num_computed; pos < q.num_computed + p.num_known_new; ++pos) {
      batch_.tokens.push_back(pos < prompt_len ? p.prompt[static_cast<std::size_t>(pos)]
                                               : p.output[static_cast<std::size_t>(pos - prompt_len)]);
    }
    for (std::int32_t i = 0; i < q.num_lookahead; ++i) batch_.tokens.push_back(proposals_[next_proposal++]);
    BatchSeq s;
    s.id = q.id;
    s.start = q.num_computed;
    s.num_new = q.num_new;
    s.block_table = p.block_table;
    s.samples = q.samples;
    s.num_sampled = q.samples ? 1 + q.num_lookahead : 1;
    s.temperature = options_.temperature;
    s.top_k = options_.top_k;
    s.top_p = options_.top_p;
    s.seed = options_.seed;
    if (const auto own = request_sampling_.find(q.id); own != request_sampling_.end()) {
      s.temperature = own->second.temperature;
      s.top_k = own->second.top_k;
      s.top_p = own->second.top_p;
      s.seed = own->second.seed;
    }
    s.token_index = token_index_[j];
    batch_.seqs.push_back(s);
  }
}

StepResult Executor::take_sampled(const StepPlan& plan, bool speculative) {
  StepResult result;
  if (speculative) result.accepted.assign(plan.seqs.size(), 0);
  std::size_t row = 0, next_proposal = 0;
  for (std::size_t j = 0; j < plan.seqs.size(); ++j) {
    const ScheduledSeq& q = plan.seqs[j];
    const auto lookahead = static_cast<std::size_t>(q.num_lookahead);
    const std::span<const TokenId> proposed(proposals_.data() + next_proposal, lookahead);
    next_proposal += lookahead;
    if (!q.samples) continue;
    const std::span<const TokenId> target(output_.sampled.data() + row, lookahead + 1);
    row += lookahead + 1;
    const std::int32_t accepted = accept(q.id, proposed, target, result);
    if (speculative) result.accepted[j] = accepted;
    if (proposer_) proposer_->verified(q.id, q.num_computed + q.num_new - q.num_lookahead + accepted);
  }
  return result;
}

StepResult Executor::execute(const StepPlan& plan, const Replica& replica) {
  const auto start = std::chrono::steady_clock::now();
  for (RequestId id : plan.aborted) forget(id);
  apply_copies(plan);
  const bool speculative = plan.num_lookahead_tokens() > 0;
  if (speculative && !proposer_) {
    throw Error("executor: step " + std::to_string(plan.step_id) + " has lookahead tokens but no proposer");
  }
  gather_seqs(plan, replica);
  propose(plan);
  build_batch(plan);
  runner_.forward(batch_, output_);
  StepResult result = take_sampled(plan, speculative);
  last_duration_ = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
  if (runner_.times_ops()) step_op_ns_.emplace_back(plan.step_id, output_.op_ns);
  return result;
}

}  // namespace twin
