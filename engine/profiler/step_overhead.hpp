#pragma once
// Whole steps through the engine's real executor and scheduler, timed the
// way the wall-clock driver times them (from the instant the step is planned
// to the end of its forward pass), and the step terms fitted from them (the
// profile's StepOverhead): how a whole step's time relates to the sum of its
// ops' table predictions, and what it costs more after the engine sat idle.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/runtime/model_config.hpp"
#include "engine/runtime/model_runner.hpp"
#include "hwprofiles/calibrated_lookup.hpp"
#include "models/step_ops.hpp"

namespace twin {

// Requests submitted together at the start; with inject_every > 0, one more
// request of inject_prompt tokens arrives every inject_every steps (mixed
// steps: its prefill joins the running decodes).
struct StepScenario {
  std::string label;
  std::int32_t requests = 1;
  std::int32_t prompt = 32;
  std::int32_t output = 8;
  std::int32_t inject_every = 0;
  std::int32_t inject_prompt = 0;
  std::int32_t inject_count = 0;
};

enum class StepClass { decode, prefill, mixed };
StepClass step_class(const BatchShape& shape);
const char* step_class_name(StepClass c);

struct MeasuredStep {
  std::string label;  // scenario label
  BatchShape shape;
  double measured_ns = 0;
};

// Runs each scenario on a fresh scheduler (vLLM preset) over one model
// runner (`runner.num_blocks` is sized here), the whole list `rounds` times
// over (a slow spell of the machine then hits one pass of a scenario, not
// all of its steps). Prompts are distinct (no prefix-cache hits).
std::vector<MeasuredStep> measure_steps(const ModelConfig& config, RunnerOptions runner,
                                        const std::vector<StepScenario>& scenarios, std::int32_t rounds = 1);

struct StepFit {
  double op_scale = 1;
  double base_ns = 0;
  double per_seq_ns = 0;
};

// Least squares on relative error: measured ~ op_scale x ops + base + per_seq
// x seqs, with features (ops, 1, seqs) per sample, op_scale > 0 and the other
// two >= 0. Without a feasible fit: scale 1, no overhead.
StepFit fit_step_terms(const std::vector<std::array<double, 3>>& features, const std::vector<double>& measured);

// Groups the steps by scenario and class, takes each group's medians and
// fits the step terms (fit_step_terms) to them.
StepOverhead fit_step_overhead(const std::vector<MeasuredStep>& steps, const CalibratedTables& tables,
                               const ModelDesc& model, Dtype weights, Dtype kv);

// The warm-up a step pays after the engine sat idle (StepOverhead's idle
// terms). Each round submits one request of `prompt` tokens (output 1: one
// prefill step) at the instant the engine wakes after each gap in turn, the
// way the wall-clock driver serves an arrival to an idle engine; gap 0 is
// the same step run back to back. Fits extra(gap) = idle_ns x (1 -
// exp(-gap / idle_tau_ns)) to the medians' excess over gap 0.
struct IdleWarmup {
  double idle_ns = 0;
  double idle_tau_ns = 0;  // 0: no warm-up measured
  std::vector<IdleSample> samples;
};
IdleWarmup measure_idle_warmup(const ModelConfig& config, RunnerOptions runner, std::int32_t prompt,
                               const std::vector<double>& gaps_ns, std::int32_t rounds);

// The least-squares fit of measure_idle_warmup over samples' (gap_ns,
// extra_ns); exposed for tests.
IdleWarmup fit_idle_warmup(std::vector<IdleSample> samples);

}  // namespace twin
