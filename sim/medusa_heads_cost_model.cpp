#include "sim/medusa_heads_cost_model.hpp"

#include <string>
#include <utility>

#include "base/error.hpp"

namespace twin {

MedusaHeadsCostModel::MedusaHeadsCostModel(RooflineCostModel pricer, std::int32_t heads, WeightPrecision weights)
    : pricer_(std::move(pricer)), heads_(heads), weights_(weights) {
  if (heads_ < 1) throw UsageError("medusa heads: need at least one head, got " + std::to_string(heads_));
}

Time MedusaHeadsCostModel::stage_time(const StepInput& step, std::vector<OpCost>* breakdown) {
  if (step.shape == nullptr) return 0;
  std::int64_t rows = 0;
  for (const SeqShape& s : step.shape->seqs) rows += s.samples ? 1 : 0;
  ops_.clear();
  medusa_heads_ops(pricer_.model(), rows, heads_, weights_, pricer_.layout().tp, ops_);
  double ns = 0;
  for (const Op& op : ops_) {
    const OpCost c = pricer_.price(op, 0);
    ns += c.time_ns;
    if (step.mix) (c.compute_bound ? step.mix->compute_ns : step.mix->memory_ns) += c.time_ns;
    if (breakdown) breakdown->push_back(c);
  }
  return priced_ns(ns, "medusa heads: a step");
}

}  // namespace twin
