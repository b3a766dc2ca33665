#include "sim/speculative_cost_model.hpp"

#include <algorithm>
#include <utility>

#include "base/error.hpp"

namespace twin {

SpeculativeCostModel::SpeculativeCostModel(std::shared_ptr<CostModel> target, std::shared_ptr<CostModel> draft)
    : target_(std::move(target)), draft_(std::move(draft)) {
  if (!target_) throw Error("speculative cost model: no target cost model (internal error)");
}

Time SpeculativeCostModel::draft_time(const StepInput& step) {
  if (!draft_ || step.plan == nullptr || step.plan->num_lookahead_tokens() == 0) return 0;
  const StepPlan& plan = *step.plan;
  StepInput input = step;
  input.plan = nullptr;  // the draft's passes are no step of the log
  input.shape = &draft_shape_;
  input.idle_ns = 0;
  // Pass 1: every seq's known tokens; a seq with lookahead samples its first proposal.
  draft_shape_.seqs.clear();
  std::int32_t max_lookahead = 0;
  for (const ScheduledSeq& q : plan.seqs) {
    SeqShape s;
    s.new_tokens = q.num_new - q.num_lookahead;
    s.context_tokens = q.num_computed;
    s.samples = q.num_lookahead > 0;
    draft_shape_.seqs.push_back(s);
    max_lookahead = std::max(max_lookahead, q.num_lookahead);
  }
  Time total = draft_->stage_time(input);
  // Passes 2..L: one token in, one proposal out, for the seqs still proposing.
  for (std::int32_t m = 1; m < max_lookahead; ++m) {
    draft_shape_.seqs.clear();
    for (const ScheduledSeq& q : plan.seqs) {
      if (q.num_lookahead <= m) continue;
      SeqShape s;
      s.new_tokens = 1;
      s.context_tokens = q.num_computed + q.num_new - q.num_lookahead + m - 1;
      s.samples = true;
      draft_shape_.seqs.push_back(s);
    }
    total += draft_->stage_time(input);
  }
  return total;
}

Time SpeculativeCostModel::stage_time(const StepInput& step, std::vector<OpCost>* breakdown) {
  return draft_time(step) + target_->stage_time(step, breakdown);
}

}  // namespace twin
