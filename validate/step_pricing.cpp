#include "validate/step_pricing.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
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


std::vector<OpTimeError> op_time_errors(const std::vector<PricedStep>& steps, const std::vector<OpTimes>& measured,
                                        std::size_t model, bool moe) {
  if (steps.empty() || steps.size() != measured.size()) return {};
  OpTimes m_ops{}, p_ops{};
  double m_total = 0, p_total = 0;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const PricedStep& s = steps[i];
    if (model >= s.predicted_ns.size()) return {};
    m_total += static_cast<double>(s.measured);
    p_total += s.predicted_ns[model];
    for (int k = 0; k < kNumTimedOps; ++k) m_ops[k] += measured[i][k];
    for (int k = 0; k < kNumOpKinds; ++k) {
      const int t = timed_op_of(static_cast<OpKind>(k), moe);
      if (t >= 0) p_ops[t] += s.op_ns[model][k];
    }
  }
  const double n = static_cast<double>(steps.size());
  auto row = [&](std::string op, double m_ns, double p_ns) {
    OpTimeError e;
    e.op = std::move(op);
    e.measured_ms = m_ns / n / 1e6;
    e.predicted_ms = p_ns / n / 1e6;
    e.error_pct = m_ns > 0 ? (p_ns - m_ns) / m_ns * 100.0 : std::numeric_limits<double>::quiet_NaN();
    return e;
  };
  std::vector<OpTimeError> out;
  double m_in = 0, p_in = 0;
  for (int k = 0; k < kNumTimedOps; ++k) {
    m_in += m_ops[k];
    p_in += p_ops[k];
    if (m_ops[k] > 0 || p_ops[k] > 0) out.push_back(row(std::string(kTimedOpNames[k]), m_ops[k], p_ops[k]));
  }
  out.push_back(row("outside the ops", std::max(0.0, m_total - m_in), std::max(0.0, p_total - p_in)));
  return out;
}

}  // namespace twin
