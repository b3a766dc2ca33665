#include "engine/runtime/executor.hpp"

#include <chrono>
#include <string>

#include "base/error.hpp"

namespace twin {

Executor::Executor(ModelRunner& runner, const ExecutorOptions& options) : runner_(runner), options_(options) {}

const std::vector<TokenId>* Executor::output_tokens(RequestId id) const {
  const auto it = outputs_.find(id);
  return it == outputs_.end() ? nullptr : &it->second;
}

StepResult Executor::execute(const StepPlan& plan, const Replica& replica) {
  const auto start = std::chrono::steady_clock::now();
  for (RequestId id : plan.aborted) outputs_.erase(id);
  // Copies out first: a block swapped out may be reused by this very step.
  if (!plan.swap_out.empty()) runner_.swap_out(plan.swap_out);
  if (!plan.swap_in.empty()) runner_.swap_in(plan.swap_in);

  batch_.clear();
  batch_.return_logits = options_.keep_logits;
  for (const ScheduledSeq& q : plan.seqs) {
    const std::optional<SeqView> view = replica.seq(q.id);
    if (!view) throw Error("executor: request " + std::to_string(q.id) + " of step " + std::to_string(plan.step_id) +
                           " is not live in the replica");
    const Request& req = *view->request;
    if (static_cast<std::int32_t>(req.prompt_tokens.size()) != req.prompt_len) {
      throw Error("executor: request " + std::to_string(q.id) + " has no prompt tokens (materialize them before add)");
    }
    const std::vector<TokenId>& out = outputs_[q.id];
    for (std::int32_t p = q.num_computed; p < q.num_computed + q.num_new; ++p) {
      if (p < req.prompt_len) {
        batch_.tokens.push_back(req.prompt_tokens[static_cast<std::size_t>(p)]);
      } else if (p - req.prompt_len < static_cast<std::int32_t>(out.size())) {
        batch_.tokens.push_back(out[static_cast<std::size_t>(p - req.prompt_len)]);
      } else {
        throw Error("executor: request " + std::to_string(q.id) + " scheduled position " + std::to_string(p) +
                    " but has generated only " + std::to_string(out.size()) + " tokens");
      }
    }
    BatchSeq s;
    s.id = q.id;
    s.start = q.num_computed;
    s.num_new = q.num_new;
    s.block_table = view->kv->blocks;
    s.samples = q.samples;
    s.temperature = options_.temperature;
    s.top_k = options_.top_k;
    s.top_p = options_.top_p;
    s.seed = options_.seed;
    s.token_index = view->num_output;
    batch_.seqs.push_back(s);
  }
  runner_.forward(batch_, output_);

  StepResult result;
  result.sampled = output_.sampled;
  std::size_t k = 0;
  for (const ScheduledSeq& q : plan.seqs) {
    if (!q.samples) continue;
    const TokenId t = output_.sampled[k++];
    outputs_[q.id].push_back(t);
    if (options_.eos_token >= 0 && t == options_.eos_token) result.stopped.push_back(q.id);
  }
  last_duration_ = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
  if (runner_.times_ops()) step_op_ns_.emplace_back(plan.step_id, output_.op_ns);
  return result;
}

}  // namespace twin
