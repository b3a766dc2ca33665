#pragma once
// The price of a speculative step: the draft's work, then the target's
// verification. The target prices the plan as it is (each decode with
// lookahead is 1 + L new tokens and 1 + L rows of logits: step_ops sees
// SeqShape::lookahead); a draft model is priced by its own cost model over
// its own op list: one pass over the step's known tokens (it mirrors the
// target's prefill chunks, and the decodes' first proposal comes out of it),
// then L - 1 single-token passes for the seqs still proposing. An n-gram
// proposer costs nothing here (a host-side lookup).
#include <cstdint>
#include <memory>
#include <vector>

#include "models/step_ops.hpp"
#include "sim/cost_model.hpp"

namespace twin {

class SpeculativeCostModel final : public CostModel {
 public:
  // `draft` may be null (n-gram). Both are for one pipeline stage.
  SpeculativeCostModel(std::shared_ptr<CostModel> target, std::shared_ptr<CostModel> draft);

  Time stage_time(const StepInput& step, std::vector<OpCost>* breakdown = nullptr) override;
  Time swap_time(std::int64_t num_blocks) override { return target_->swap_time(num_blocks); }

  // The draft's time for the plan alone (0 without a draft or lookahead).
  Time draft_time(const StepInput& step);

 private:
  std::shared_ptr<CostModel> target_, draft_;
  BatchShape draft_shape_;  // reused
};

}  // namespace twin
