#pragma once
// The price of a speculative step: the draft's work, then the target's
// verification. The target prices the plan as it is (each decode with
// lookahead is 1 + L new tokens and 1 + L rows of logits: step_ops sees
// SeqShape::lookahead); a draft model is priced by its own cost model over
// its own op list: one pass over the step's known tokens (it mirrors the
// target's prefill chunks, and the decodes' first proposal comes out of it),
// then L - 1 single-token passes for the seqs still proposing. An n-gram
// proposer costs nothing here (a host-side lookup).
//
// A draft tree of T nodes (SpeculativeConfig::num_draft_tokens, depth L):
// the target verifies 1 + T tokens (and as many rows of logits) for each
// seq with L proposals instead of 1 + L (a seq near its end proposing
// L' < L: ceil(T L' / L) nodes). The draft's passes stay the chain's L:
// a level's candidates are extra rows of one pass, and priced as a
// multi-token chunk the head's attention takes the prefill curve, which
// prices a 5-token pass below a 1-token decode (the two curves are fitted
// apart), so the chain's passes are the steadier estimate. T = L is the
// chain. The scheduler still holds L lookahead slots (the
// accepted path; the other branches' KV is transient).
#include <cstdint>
#include <memory>
#include <vector>

#include "models/step_ops.hpp"
#include "sim/cost_model.hpp"

namespace twin {

class SpeculativeCostModel final : public CostModel {
 public:
  // `draft` may be null (n-gram). Both are for one pipeline stage.
  // `tree_tokens`: a draft tree's nodes (0: a chain), `depth` its depth
  // (num_speculative_tokens).
  // `one_draft_pass`: the draft proposes all L tokens in its first pass
  // (Medusa's heads, MedusaHeadsCostModel), so there are no passes 2..L.
  SpeculativeCostModel(std::shared_ptr<CostModel> target, std::shared_ptr<CostModel> draft,
                       std::int32_t tree_tokens = 0, std::int32_t depth = 0, bool one_draft_pass = false);

  Time stage_time(const StepInput& step, std::vector<OpCost>* breakdown = nullptr) override;
  Time swap_time(std::int64_t num_blocks) override { return target_->swap_time(num_blocks); }
  bool splits_steps() const override { return target_->splits_steps() && (!draft_ || draft_->splits_steps()); }

  // The draft's time for the plan alone (0 without a draft or lookahead).
  Time draft_time(const StepInput& step);

 private:
  std::shared_ptr<CostModel> target_, draft_;
  std::int32_t tree_tokens_ = 0, depth_ = 0;
  bool one_draft_pass_ = false;
  // Nodes verified for a seq proposing `lookahead` tokens.
  std::int64_t tree_nodes(std::int64_t lookahead) const;
  BatchShape draft_shape_;   // reused
  BatchShape verify_shape_;  // the plan's shape with each tree's nodes
};

}  // namespace twin
