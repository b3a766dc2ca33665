#pragma once
// Whole steps through the engine's real executor and scheduler, timed the
// way the wall-clock driver times them (from the instant the step is planned
// to the end of its forward pass), and the step terms fitted from them (the
// profile's StepOverhead): how a whole step's time relates to the sum of its
// ops' table predictions, and what it costs more after the engine sat idle.
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/runtime/forward_batch.hpp"
#include "engine/runtime/model_config.hpp"
#include "engine/runtime/model_runner.hpp"
#include "engine/runtime/engine.hpp"
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
  OpTimes op_ns{};    // the runner's in-situ time per op inside this step
};

// Runs each scenario on a fresh replica of one engine built by the engine's
// entry point (engine/runtime/engine) from `engine`: its backend, weights,
// dtypes and threads as given; the scheduler is the vLLM preset with the
// KV blocks and max_model_len the scenarios need (set here). The whole list
// runs `rounds` times over (a slow spell of the machine then hits one pass
// of a scenario, not all of its steps). Prompts are distinct (no
// prefix-cache hits).
// `progress(done, total)`, if given, after each scenario run (calibrate's
// progress line: these runs are most of its time).
std::vector<MeasuredStep> measure_steps(EngineSettings engine, const std::vector<StepScenario>& scenarios,
                                        std::int32_t rounds = 1,
                                        const std::function<void(std::size_t done, std::size_t total)>& progress = {});

struct StepFit {
  double op_scale = 1;
  double base_ns = 0;
  double per_seq_ns = 0;
};

// Least squares on relative error: measured ~ op_scale x ops + base + per_seq
// x seqs, with features (ops, 1, seqs) per sample, op_scale > 0 and the other
// two >= 0. Without a feasible fit: scale 1, no overhead.
StepFit fit_step_terms(const std::vector<std::array<double, 3>>& features, const std::vector<double>& measured);

// One measured step as the per-kind fit sees it: the tables' isolated times
// and the runner's in-situ times, per timed op.
struct StepSample {
  std::string group;  // steps of one scenario and class share their medians
  double num_seqs = 0;
  double new_tokens = 0;
  double measured_ns = 0;
  OpTimes table_ns{};
  OpTimes in_situ_ns{};
};

struct OpScaleFit {
  OpTimes scales{};  // by timed op; 1 where nothing was timed
  // By timed op: what its calls cost in a step beyond their scaled tables
  // (the in-situ time's intercept: a CPU thread pool's dispatch, a GPU's
  // launch gaps), added once per step that runs the op.
  OpTimes fixed{};
  double op_scale = 1;  // the global factor: 1 unless fitted without in-situ times
  double base_ns = 0;
  double per_seq_ns = 0;
  bool per_kind = false;  // false: no in-situ times, the version 1 global fit
  StepFitQuality quality;
  std::vector<OverheadSample> samples;  // per group, at its medians
};

// The step model from whole steps. The steps are grouped (StepSample::group)
// and each group reduced to its medians (a slow spell of the machine moves a
// third of a group's steps, which the median ignores). Per timed op k, the
// scale s_k minimises sum over groups of ((s_k x table_k - in_situ_k) /
// measured)^2: each op's miss counted as the share of its group's step it
// moves: the fit serves the step's relative error, so a short decode group
// counts as much as a long prefill group (unweighted, the prefills would set
// every scale), and among the groups those where the op is a larger share of
// the step count more (where it is 1%, its ratio is mostly timer noise and
// matters little to the step). Then base_ns, per_seq_ns
// >= 0 on what the scaled ops leave of each group's step, least squares on
// the relative error of the step. Without in-situ
// times (every in_situ_ns 0), the global fit_step_terms. The quality figures
// are over every step, not the groups' medians.
// `fixed_costs` false: scales alone (no per-op intercept), as profiles
// before op_fixed_ns were fitted; kept to measure the difference.
OpScaleFit fit_op_scales(const std::vector<StepSample>& steps, bool fixed_costs = true);

// Prices each step's ops from the tables, groups the steps by scenario and
// class and fits the step model (fit_op_scales): the profile's StepOverhead
// less the idle terms.
StepOverhead fit_step_overhead(const std::vector<MeasuredStep>& steps, const CalibratedTables& tables,
                               const ModelDesc& model, Dtype weights, Dtype kv,
                               bool fixed_costs = true);

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
IdleWarmup measure_idle_warmup(EngineSettings engine, std::int32_t prompt, const std::vector<double>& gaps_ns,
                               std::int32_t rounds);

// The least-squares fit of measure_idle_warmup over samples' (gap_ns,
// extra_ns); exposed for tests.
IdleWarmup fit_idle_warmup(std::vector<IdleSample> samples);

}  // namespace twin
