#include "sim/speculative_cost_model.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "base/error.hpp"

namespace twin {

SpeculativeCostModel::SpeculativeCostModel(std::shared_ptr<CostModel> target, std::shared_ptr<CostModel> draft,
                                           std::int32_t tree_tokens, std::int32_t depth, bool one_draft_pass)
    : target_(std::move(target)),
      draft_(std::move(draft)),
      tree_tokens_(tree_tokens),
      depth_(depth),
      one_draft_pass_(one_draft_pass) {
  if (!target_) throw Error("speculative cost model: no target cost model (internal error)");
  if (tree_tokens_ > 0 && (depth_ < 1 || tree_tokens_ < depth_)) {
    throw UsageError("speculative cost model: a draft tree of " + std::to_string(tree_tokens_) +
                     " tokens needs a depth from 1 to its tokens, got " + std::to_string(depth_));
  }
}

std::int64_t SpeculativeCostModel::tree_nodes(std::int64_t lookahead) const {
  if (tree_tokens_ == 0 || lookahead <= 0) return lookahead;
  return std::max<std::int64_t>(lookahead, (tree_tokens_ * lookahead + depth_ - 1) / depth_);
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
  if (one_draft_pass_) return total;
  // Passes 2..L: one token in, one proposal out, for the seqs still
  // proposing (a tree's too: its draft passes stay the chain's, below).
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
  const Time draft = draft_time(step);
  if (tree_tokens_ == 0 || step.shape == nullptr) return draft + target_->stage_time(step, breakdown);
  // The tree's nodes replace the chain's proposals in the verification.
  verify_shape_.seqs.assign(step.shape->seqs.begin(), step.shape->seqs.end());
  for (SeqShape& s : verify_shape_.seqs) {
    const std::int64_t nodes = tree_nodes(s.lookahead);
    s.new_tokens += nodes - s.lookahead;
    s.lookahead = nodes;
  }
  StepInput input = step;
  input.shape = &verify_shape_;
  return draft + target_->stage_time(input, breakdown);
}

}  // namespace twin
