#pragma once
// Whole steps through the engine's real executor and scheduler, timed the
// way the wall-clock driver times them (from the instant the step is planned
// to the end of its forward pass), and the per-step overhead fitted from them:
// what a step costs beyond the sum of its ops' table predictions.
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
// runner (`runner.num_blocks` is sized here). Prompts are distinct (no
// prefix-cache hits).
std::vector<MeasuredStep> measure_steps(const ModelConfig& config, RunnerOptions runner,
                                        const std::vector<StepScenario>& scenarios);

// Groups the steps by scenario and class, takes each group's medians and
// fits overhead = base + per_seq x seqs to the groups' residuals (measured -
// sum of op predictions) by least squares.
StepOverhead fit_step_overhead(const std::vector<MeasuredStep>& steps, const CalibratedTables& tables,
                               const ModelDesc& model, Dtype weights, Dtype kv);

}  // namespace twin
