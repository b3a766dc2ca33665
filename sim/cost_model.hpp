#pragma once
// What stands in for the GPUs: the time one pipeline stage of a replica spends
// on a step. The roofline model prices the op list from models/; the
// calibrated (measured tables) and replay (recorded step log) models plug in
// behind the same interface.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "base/types.hpp"
#include "engine/core/step_plan.hpp"
#include "models/step_ops.hpp"

namespace twin {

// How a priced step's busy time splits by what bound it (issue 44: the
// energy of a step). A cost model that can tell adds its ops' times here
// (CostModel::splits_steps); the rest of the stage time (per-step
// overhead) is neither.
struct StepMix {
  double compute_ns = 0;  // ops bound by the compute roof
  double memory_ns = 0;   // ops bound by memory traffic, and transfers
};

// One step as a cost model may see it. The shape is built once per plan and
// shared by its stages; the plan is there for models keyed by step (replay).
struct StepInput {
  const StepPlan* plan = nullptr;
  const BatchShape* shape = nullptr;
  std::int32_t replica = 0;
  std::int32_t stage = 0;  // pipeline stage, 0-based
  // How long this stage sat idle before the step: from the end of its
  // previous step (or t = 0) to this step's start; 0 when back to back.
  Time idle_ns = 0;
  // Lockstep DP ranks under EP: the tokens of every rank's batch, which the
  // experts are routed (the shape is this rank's own); -1: none. Priced by
  // the roofline only (StepSums::group_tokens).
  std::int64_t group_tokens = -1;
  // Filled (added to) by cost models that split a step's time; null: not asked.
  StepMix* mix = nullptr;
};

// The price of one op of the step (all its `repeat` instances together).
struct OpCost {
  OpKind kind{};
  double time_ns = 0;
  double flops = 0;
  double bytes = 0;
  double comm_bytes = 0;
  std::int32_t repeat = 1;
  bool compute_bound = false;
  // What priced it (roofline): the curve of the binding roof ("gemm_curve",
  // "memory" for the constant memory efficiency, a profile's named curve,
  // "link" for transfers) and the efficiency it gave; empty otherwise.
  std::string_view curve{};
  double efficiency = 0;
};

// A price in ns as the simulator's clock holds it. Throws twin::Error when
// it is not finite or over about three years: profile numbers (peaks,
// bandwidths, latencies, measured tables) far outside any real range.
// `origin`, when given, names the profile the numbers came from.
inline Time priced_ns(double ns, const char* what, const std::string* origin = nullptr) {
  if (!(std::fabs(ns) <= 1e17)) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%g s", ns / 1e9);
    throw Error((origin ? *origin + ": " : std::string()) + what + " is priced at " + buf +
                ", over three years; check the hardware or calibrated profile's peaks, bandwidths and latencies");
  }
  return static_cast<Time>(std::llround(ns));
}

class CostModel {
 public:
  virtual ~CostModel() = default;
  // ns the stage is busy with the step, including the fixed per-step
  // overhead and the send to the next stage. When `breakdown` is given, the
  // per-op prices are appended to it.
  virtual Time stage_time(const StepInput& step, std::vector<OpCost>* breakdown = nullptr) = 0;
  // ns to copy `num_blocks` KV blocks between one GPU and host memory.
  virtual Time swap_time(std::int64_t num_blocks) = 0;
  // Whether stage_time fills StepInput::mix (issue 44: without, a run's
  // energy is not known).
  virtual bool splits_steps() const { return false; }
};

}  // namespace twin
