#include "validate/step_pricing.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "metrics/percentile.hpp"

namespace twin {

std::string_view composition_name(Composition c) {
  switch (c) {
    case Composition::decode_only: return "decode-only";
    case Composition::prefill_only: return "prefill-only";
    case Composition::mixed: return "mixed";
  }
  return "unknown";
}

Composition composition_of(const StepPlan& plan) {
  bool prefill = false, decode = false;
  for (const ScheduledSeq& s : plan.seqs) (s.is_prefill ? prefill : decode) = true;
  if (prefill && decode) return Composition::mixed;
  return prefill ? Composition::prefill_only : Composition::decode_only;
}

PricingCostModel::PricingCostModel(std::shared_ptr<CostModel> timing, std::vector<std::shared_ptr<CostModel>> pricers)
    : timing_(std::move(timing)), pricers_(std::move(pricers)) {}

Time PricingCostModel::stage_time(const StepInput& step, std::vector<OpCost>* breakdown) {
  const Time measured = timing_->stage_time(step, breakdown);
  PricedStep p;
  p.measured = measured;
  if (step.plan != nullptr) {
    p.composition = composition_of(*step.plan);
    p.batch_size = static_cast<std::int32_t>(step.plan->seqs.size());
    for (const ScheduledSeq& s : step.plan->seqs) {
      p.new_tokens += s.num_new;
      p.context_tokens += s.num_computed;
    }
  }
  const std::int64_t copies =
      step.plan != nullptr ? static_cast<std::int64_t>(step.plan->swap_in.size() + step.plan->swap_out.size()) : 0;
  for (const auto& model : pricers_) {
    scratch_.clear();
    // As the simulator prices a step: swap copies, then the stage.
    const Time swap = copies > 0 ? model->swap_time(copies) : 0;
    const Time t = std::max<Time>(1, swap + model->stage_time(step, &scratch_));
    p.predicted_ns.push_back(static_cast<double>(t));
    std::array<double, kNumOpKinds> ops{};
    for (const OpCost& c : scratch_) {
      const int k = static_cast<int>(c.kind);
      if (k >= 0 && k < kNumOpKinds) ops[k] += c.time_ns;
    }
    p.op_ns.push_back(ops);
  }
  steps_.push_back(std::move(p));
  return measured;
}

std::vector<CompositionError> composition_errors(const std::vector<PricedStep>& steps, std::size_t model) {
  std::vector<CompositionError> out;
  for (int c = 0; c < kNumCompositions; ++c) {
    CompositionError e;
    e.composition = static_cast<Composition>(c);
    double sum_measured = 0, sum_predicted = 0, sum_abs = 0;
    std::vector<double> signed_err, abs_err;
    for (const PricedStep& s : steps) {
      if (s.composition != e.composition || model >= s.predicted_ns.size()) continue;
      ++e.steps;
      const double m = static_cast<double>(s.measured), p = s.predicted_ns[model];
      sum_measured += m;
      sum_predicted += p;
      const double err = (p - m) / m * 100.0;
      signed_err.push_back(err);
      abs_err.push_back(std::abs(err));
      sum_abs += std::abs(err);
      for (int k = 0; k < kNumOpKinds; ++k) e.op_ms_mean[k] += s.op_ns[model][k] / 1e6;
    }
    if (e.steps == 0) continue;
    const double n = static_cast<double>(e.steps);
    e.measured_ms_mean = sum_measured / n / 1e6;
    e.predicted_ms_mean = sum_predicted / n / 1e6;
    e.error_pct_of_total = (sum_predicted - sum_measured) / sum_measured * 100.0;
    e.mean_abs_error_pct = sum_abs / n;
    std::sort(signed_err.begin(), signed_err.end());
    std::sort(abs_err.begin(), abs_err.end());
    e.p50_error_pct = percentile_linear(signed_err, 50);
    e.p90_abs_error_pct = percentile_linear(abs_err, 90);
    for (double& v : e.op_ms_mean) v /= n;
    out.push_back(e);
  }
  return out;
}

}  // namespace twin
