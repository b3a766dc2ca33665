#pragma once
// Medusa-1's heads as a speculative step's draft (SpeculativeMethod::medusa):
// every head runs once per step on the last hidden state of each seq that
// proposes, in one pass after the target's (not k passes one after the
// other, as a draft model's), so the draft's time is the price of
// models/step_ops' medusa_heads_ops on those rows. Priced by a roofline of
// the target's GPUs and layout (the heads' LM heads are vocab-parallel over
// its tp group), also when the target has a calibrated profile.
#include <cstdint>
#include <vector>

#include "models/step_ops.hpp"
#include "sim/cost_model.hpp"
#include "sim/roofline_cost_model.hpp"

namespace twin {

class MedusaHeadsCostModel final : public CostModel {
 public:
  // `pricer` prices the heads' ops (its model and layout are the target's);
  // `heads` the proposals per step.
  MedusaHeadsCostModel(RooflineCostModel pricer, std::int32_t heads, WeightPrecision weights);

  // The step's seqs that sample (SeqShape::samples) are the heads' rows.
  Time stage_time(const StepInput& step, std::vector<OpCost>* breakdown = nullptr) override;
  Time swap_time(std::int64_t) override { return 0; }
  bool splits_steps() const override { return true; }

 private:
  RooflineCostModel pricer_;
  std::int32_t heads_;
  WeightPrecision weights_;
  std::vector<Op> ops_;  // reused
};

}  // namespace twin
