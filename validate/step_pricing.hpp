#pragma once
// Step-time error on identical steps. During the replay run (the simulator
// fed the engine's step log) every planned step is exactly the engine's, so
// pricing it with other cost models at that moment gives, step by step, what
// each model predicts against what the engine measured — free of the
// queueing feedback that blurs end-to-end latencies.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/records.hpp"
#include "engine/core/step_plan.hpp"
#include "engine/runtime/forward_batch.hpp"
#include "models/step_ops.hpp"
#include "sim/cost_model.hpp"

namespace twin {

enum class Composition { decode_only, prefill_only, mixed };
inline constexpr int kNumCompositions = 3;
std::string_view composition_name(Composition c);  // "decode-only", "prefill-only", "mixed"
Composition composition_of(const StepPlan& plan);   // by ScheduledSeq::is_prefill, as the step records count

struct PricedStep {
  Composition composition = Composition::decode_only;
  std::int32_t batch_size = 0;
  std::int64_t new_tokens = 0;
  std::int64_t context_tokens = 0;
  Time measured = 0;                  // what the timing model (the replay) returned
  std::vector<double> predicted_ns;   // per pricing model, in the constructor's order
  std::vector<std::array<double, kNumOpKinds>> op_ns;  // per pricing model: predicted ns by op kind
};

class PricingCostModel final : public CostModel {
 public:
  // `timing` decides the step times (the replay); each of `pricers` only prices.
  PricingCostModel(std::shared_ptr<CostModel> timing, std::vector<std::shared_ptr<CostModel>> pricers);
  Time stage_time(const StepInput& step, std::vector<OpCost>* breakdown = nullptr) override;
  Time swap_time(std::int64_t num_blocks) override { return timing_->swap_time(num_blocks); }
  const std::vector<PricedStep>& steps() const { return steps_; }

 private:
  std::shared_ptr<CostModel> timing_;
  std::vector<std::shared_ptr<CostModel>> pricers_;
  std::vector<PricedStep> steps_;
  std::vector<OpCost> scratch_;
};

// Per composition, for one pricing model: how far its step times are from
// the measured ones. Signed errors are (predicted - measured) / measured.
struct CompositionError {
  Composition composition = Composition::decode_only;
  std::int64_t steps = 0;
  double measured_ms_mean = 0, predicted_ms_mean = 0;
  double error_pct_of_total = 0;    // (sum predicted - sum measured) / sum measured
  double mean_abs_error_pct = 0;    // mean over steps of |error|
  double p50_error_pct = 0, p90_abs_error_pct = 0;
  std::array<double, kNumOpKinds> op_ms_mean{};  // the model's predicted ms per op kind, mean per step
};

// One entry per composition that occurs (in enum order), for pricer `model`.
std::vector<CompositionError> composition_errors(const std::vector<PricedStep>& steps, std::size_t model);

// Per op, over all the engine's steps: the time the runner measured inside
// its steps against pricer `model`'s price of the same steps, in ms per step.
// Rows for the runner's ops that either side spends time on, in op order,
// then "outside the ops": the step time not spent in any op (host work
// between steps, scheduling, the runner's bookkeeping) against the model's
// step time beyond its ops (its fitted overhead). Empty unless `measured`
// has one entry per priced step.
struct OpTimeError {
  std::string op;
  double measured_ms = 0, predicted_ms = 0;
  double error_pct = 0;  // (predicted - measured) / measured; NaN when nothing was measured
};
std::vector<OpTimeError> op_time_errors(const std::vector<PricedStep>& steps, const std::vector<OpTimes>& measured,
                                        std::size_t model, bool moe);

}  // namespace twin
