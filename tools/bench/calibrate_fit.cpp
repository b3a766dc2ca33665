// bench_calibrate_fit: how well a calibrated profile of `small` prices whole
// engine steps on this CPU, by batch composition (decode-only, prefill-only,
// mixed), with the per-kind op scales and fixed costs fitted from in-situ op
// times, against the same scales without fixed costs and the single global
// scale of profile version 1, on the same tables and steps.
//
// A quick calibration (`calibrate --model small --quick`, one round) gives
// the tables; both step models are fitted on the same steps (the quick
// scenarios, run again); then fresh step scenarios through the engine's
// executor (not the ones the fits saw) are priced with lookup_step, the
// profiler's and validate's step pricing. Signed errors are (predicted - measured) / measured. Asserts
// nothing: these machines are noisy.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/profiler/calibrate.hpp"
#include "engine/profiler/op_timer.hpp"
#include "engine/profiler/step_overhead.hpp"
#include "engine/runtime/model_config.hpp"
#include "hwprofiles/calibrated_lookup.hpp"
#include "models/model_desc.hpp"

namespace {

using namespace twin;

struct Row {
  std::vector<double> err;  // signed, per step
  double measured = 0, predicted = 0;
};

void print_rows(const char* name, const Row (&rows)[3]) {
  for (int c = 0; c < 3; ++c) {
    const Row& r = rows[c];
    if (r.err.empty()) continue;
    double abs_sum = 0, abs_max = 0;
    for (double e : r.err) {
      abs_sum += std::abs(e);
      abs_max = std::max(abs_max, std::abs(e));
    }
    const double n = static_cast<double>(r.err.size());
    std::printf("%-13s %-8s %5zu %11.2f %11.2f %+9.1f%% %+9.1f%% %9.1f%% %9.1f%%\n", name,
                step_class_name(static_cast<StepClass>(c)), r.err.size(), r.measured / n / 1e6, r.predicted / n / 1e6,
                100 * (r.predicted - r.measured) / r.measured, 100 * quantile(r.err, 0.5), 100 * abs_sum / n,
                100 * abs_max);
  }
}

}  // namespace

int main() {
  const auto t0 = std::chrono::steady_clock::now();
  const ModelDesc model = resolve_model("small");
  CalibrateOptions o;
  o.quick = true;
  o.rounds = 1;
  const CalibratedProfile calibrated = calibrate(model, o);
  const StepFitQuality& q = calibrated.overhead.fit;
  std::printf("small, quick profile (%.0f s): fit over %lld steps: mean |err| %.1f%%, max %.1f%%; unscaled table ops "
              "/ step %.2f (%.2f to %.2f), in-situ ops / step %.2f\n",
              calibrated.metadata.seconds, static_cast<long long>(q.steps), 100 * q.mean_abs_error,
              100 * q.max_abs_error, q.unscaled_ratio_mean, q.unscaled_ratio_min, q.unscaled_ratio_max,
              q.in_situ_ratio_mean);

  // Fresh steps, priced but not fitted: decode-only at two batch sizes,
  // prefill-only, and prompts joining running decodes.
  EngineSettings engine;
  engine.model_config = model_config_from(model);
  // (The prompts stay within the quick grid's 256 tokens: nothing extrapolates.)
  const std::vector<StepScenario> scenarios = {{"decode x2", 2, 48, 8, 0, 0, 0},
                                               {"decode x16", 16, 32, 6, 0, 0, 0},
                                               {"prefill 96", 1, 96, 1, 0, 0, 0},
                                               {"prefill 3x64", 3, 64, 1, 0, 0, 0},
                                               {"mixed x6", 6, 32, 10, 2, 80, 4}};
  const std::vector<MeasuredStep> steps = measure_steps(engine, scenarios, 2);

  // Both step models on the same tables and the same fitting steps (the
  // quick calibration's scenarios, run again): the per-kind fit with the
  // steps' in-situ op times, and version 1's single scale without them.
  const std::vector<MeasuredStep> fit_steps = measure_steps(
      engine,
      {{"decode x1", 1, 16, 6, 0, 0, 0}, {"decode x8", 8, 16, 6, 0, 0, 0}, {"prefill", 1, 64, 1, 0, 0, 0},
       {"prefill", 1, 64, 1, 0, 0, 0}, {"prefill", 1, 64, 1, 0, 0, 0}, {"mixed x4", 4, 16, 8, 2, 48, 3}},
      2);
  std::vector<MeasuredStep> untimed = fit_steps;
  for (MeasuredStep& s : untimed) s.op_ns.fill(0.0);
  const CalibratedTables tables(calibrated, "quick");
  CalibratedProfile per_kind = calibrated, scales_only = calibrated, global = calibrated;
  per_kind.overhead = fit_step_overhead(fit_steps, tables, model, Dtype::fp32, Dtype::fp32);
  scales_only.overhead = fit_step_overhead(fit_steps, tables, model, Dtype::fp32, Dtype::fp32, false);
  global.overhead = fit_step_overhead(untimed, tables, model, Dtype::fp32, Dtype::fp32);
  std::printf("per-kind step model: scales");
  for (const CurveTable& t : calibrated.gemm)
    std::printf(" %s %.2f", std::string(op_name(t.op)).c_str(), per_kind.overhead.op_scales[static_cast<int>(t.op)]);
  for (const CurveTable& t : calibrated.elementwise)
    std::printf(" %s %.2f", std::string(op_name(t.op)).c_str(), per_kind.overhead.op_scales[static_cast<int>(t.op)]);
  std::printf(" attention %.2f; fixed us per step", per_kind.overhead.op_scales[static_cast<int>(OpKind::attn_prefill)]);
  for (int k = 0; k < kNumTimedOps; ++k) {
    if (per_kind.overhead.op_fixed_ns[k] > 0) {
      std::printf(" %s %.0f", std::string(kTimedOpNames[k]).c_str(), per_kind.overhead.op_fixed_ns[k] / 1e3);
    }
  }
  std::printf("; + %.0f us + %.0f us per seq\n", per_kind.overhead.base_ns / 1e3, per_kind.overhead.per_seq_ns / 1e3);
  std::printf("scales-only step model (no fixed costs): + %.0f us + %.0f us per seq\n",
              scales_only.overhead.base_ns / 1e3, scales_only.overhead.per_seq_ns / 1e3);
  std::printf("version 1 step model: %.3f x ops + %.0f us + %.0f us per seq\n", global.overhead.op_scale,
              global.overhead.base_ns / 1e3, global.overhead.per_seq_ns / 1e3);

  std::printf("\n%-13s %-8s %5s %11s %11s %10s %10s %10s %10s\n", "step model", "class", "steps", "measured ms",
              "predicted ms", "total err", "p50 err", "mean |err|", "max |err|");
  for (const auto& [name, profile] :
       std::vector<std::pair<const char*, const CalibratedProfile*>>{
           {"per-kind", &per_kind}, {"scales only", &scales_only}, {"global (v1)", &global}}) {
    const CalibratedTables tables(*profile, name);
    Row rows[3];
    std::vector<Op> scratch;
    for (const MeasuredStep& s : steps) {
      const StepLookup l = lookup_step(tables, model, s.shape, ParallelLayout{}, Dtype::fp32, Dtype::fp32, 0, scratch);
      Row& r = rows[static_cast<int>(step_class(s.shape))];
      r.err.push_back((l.total_ns() - s.measured_ns) / s.measured_ns);
      r.measured += s.measured_ns;
      r.predicted += l.total_ns();
    }
    print_rows(name, rows);
  }
  std::printf("(%.0f s in all)\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}
